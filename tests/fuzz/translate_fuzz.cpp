// libFuzzer target: the translations between OpenAI chat completions and
// Anthropic messages, between OpenAI Responses and chat completions, and
// and between Responses and messages, on arbitrary input.
// Oracles: a request either is refused (a 400) or becomes a JSON object;
// a stream, fed whole or split at a point taken from the input, becomes
// the same well-formed events (each event's data a JSON object, or
// [DONE]), whatever it held; a whole answer becomes a JSON body.
#include <boost/json/parse.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "stream/sse_parser.hpp"
#include "translate/anthropic_from_chat.hpp"
#include "translate/anthropic_from_responses.hpp"
#include "translate/chat_from_anthropic.hpp"
#include "translate/chat_from_responses.hpp"
#include "translate/prompt_cache.hpp"
#include "translate/request.hpp"
#include "translate/responses_from_anthropic.hpp"
#include "translate/responses_from_chat.hpp"

using namespace tokengate;

namespace {

bool is_json_object(std::string_view text) {
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  return !ec && v.is_object();
}

// The blocks of a Messages request that carry cache_control.
std::size_t breakpoints(std::string_view text) {
  auto v = boost::json::parse(text);
  std::size_t n = 0;
  auto count = [&](const boost::json::value* list) {
    if (list && list->is_array())
      for (const auto& b : list->get_array())
        n += b.is_object() && b.get_object().contains("cache_control");
  };
  count(v.get_object().if_contains("tools"));
  count(v.get_object().if_contains("system"));
  if (auto* m = v.get_object().if_contains("messages"); m && m->is_array())
    for (const auto& message : m->get_array())
      if (message.is_object()) count(message.get_object().if_contains("content"));
  return n;
}

void check_request(std::string_view body) {
  translate::request_options options{100, config::limit_field::max_completion_tokens};
  for (auto out : {translate::anthropic_request_from_chat(body, options),
                   translate::chat_request_from_anthropic(body, options),
                   translate::chat_request_from_responses(body, options),
                   translate::responses_request_from_chat(body, options)}) {
    if (auto* e = std::get_if<request_error>(&out)) {
      check(e->status == 400);
      continue;
    }
    check(is_json_object(std::get<translate::translated_request>(out).body));
  }
  // prompt_cache: auto, with a minimum every prompt reaches: at most 4 breakpoints.
  options.prompt_cache_min_tokens = 1;
  auto cached = translate::anthropic_request_from_chat(body, options);
  if (auto* t = std::get_if<translate::translated_request>(&cached)) {
    check(is_json_object(t->body));
    check(breakpoints(t->body) <= translate::max_cache_breakpoints);
  }
}

struct feed final : stream::sse_sink {
  stream::answer_translator* t = nullptr;
  std::string out;
  void on_event(const stream::sse_event& e) override { t->on_event(e, out); }
};

// Every event the translation wrote carries a JSON object (or [DONE]).
struct well_formed final : stream::sse_sink {
  void on_event(const stream::sse_event& e) override {
    check(e.data == "[DONE]" || is_json_object(e.data));
  }
};

std::string translated(stream::answer_translator& t, std::string_view body, std::size_t split) {
  feed f;
  f.t = &t;
  stream::sse_parser parser;
  parser.feed(body.substr(0, split), f);
  parser.feed(body.substr(split), f);
  t.on_end(f.out);
  t.on_cut(5, f.out);
  return f.out;
}

template <typename Make>
void check_stream(Make make, std::string_view body, std::size_t split) {
  auto whole = make();
  auto pieces = make();
  auto a = translated(*whole, body, body.size());
  auto b = translated(*pieces, body, split);
  check(a == b);
  well_formed w;
  stream::sse_parser parser;
  parser.feed(a, w);
  check(parser.at_event_boundary());
  // And as a whole answer (a completion, or an error by its status).
  for (unsigned status : {200u, 429u, 503u, 529u}) {
    auto t = make();
    std::string answer(body);
    t->whole(status, answer);
    check(is_json_object(answer));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  check_request(input);
  std::size_t split = size ? data[0] % (size + 1) : 0;
  // (one time for both translations: they are compared byte for byte)
  check_stream([] { return std::make_unique<translate::chat_from_anthropic>(true, 1796000000); },
               input, split);
  check_stream([] { return std::make_unique<translate::anthropic_from_chat>("m"); }, input, split);
  check_stream(
      [] { return std::make_unique<translate::responses_from_chat>("m", 1796000000, "0123abcd"); },
      input, split);
  check_stream([] { return std::make_unique<translate::chat_from_responses>(true, 1796000000); },
               input, split);
  check_stream(
      [] {
        return std::make_unique<translate::responses_from_anthropic>("m", 1796000000, "0123abcd");
      },
      input, split);
  check_stream([] { return std::make_unique<translate::anthropic_from_responses>("m"); }, input,
               split);
  return 0;
}
