#include "stream/native_dialect.hpp"

#include "stream/json_fields.hpp"

namespace tokengate::stream {
namespace {

// Ollama: a message (or /api/generate's response) per line; the last one
// says done, why, and the counts.
void read_ollama(const json_fields::json::object& e, bool done, observation& o) {
  using namespace json_fields;
  if (auto* message = obj(e, "message")) {
    o.text(0, str(*message, "content"));
    o.reasoning(str(*message, "thinking"));
    if (auto* calls = arr(*message, "tool_calls"); calls && !calls->empty())
      o.add_kinds(kind_tool_call);
  }
  o.text(0, str(e, "response"));  // /api/generate
  if (!done) return;
  o.finish(0, str(e, "done_reason").empty() ? "stop" : str(e, "done_reason"));
  if (e.contains("eval_count") || e.contains("prompt_eval_count"))
    o.usage(integer(&e, "prompt_eval_count"), integer(&e, "eval_count"));
  o.done("\"done\": true");
}

// llama.cpp's /completion: content per event; the last one says stop, why,
// and the counts.
void read_llama_cpp(const json_fields::json::object& e, bool stop, observation& o) {
  using namespace json_fields;
  o.text(0, str(e, "content"));
  if (!stop) return;
  o.finish(0, str(e, "stop_type").empty() ? "stop" : str(e, "stop_type"));
  if (e.contains("tokens_predicted"))
    o.usage(integer(&e, "tokens_evaluated"), integer(&e, "tokens_predicted"));
  o.done("\"stop\": true");
}

}  // namespace

void native_reading::read_full(const boost::json::value& event, observation& o) {
  const auto& e = event.get_object();
  if (auto* done = e.if_contains("done"); done && done->is_bool())
    read_ollama(e, done->get_bool(), o);
  else if (auto* stop = e.if_contains("stop"); stop && stop->is_bool())
    read_llama_cpp(e, stop->get_bool(), o);
}

}  // namespace tokengate::stream
