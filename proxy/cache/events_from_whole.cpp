// A stored whole answer told as its dialect's events (cache/forms.hpp).
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <vector>

#include "cache/forms.hpp"
#include "cache/responses_events.hpp"

namespace tokengate::cache {
namespace {

namespace json = boost::json;

// Chat completions: per choice the role, its text a word a chunk, its
// tool calls, its finish; then the usage-only chunk and [DONE].
std::string chat_events(const json::object& whole) {
  std::string out;
  auto chunk = [&](json::value choices) {
    json::object c{{"id", whole.contains("id") ? whole.at("id") : ""},
                   {"object", "chat.completion.chunk"},
                   {"created", whole.contains("created") ? whole.at("created") : 0},
                   {"model", whole.contains("model") ? whole.at("model") : ""}};
    if (auto* f = whole.if_contains("system_fingerprint")) c["system_fingerprint"] = *f;
    c["choices"] = std::move(choices);
    return c;
  };
  auto one = [&](const json::value& index, json::object delta, json::value finish = nullptr) {
    add_event(out, "",
              chunk(json::array{json::object{
                  {"index", index}, {"delta", std::move(delta)}, {"finish_reason", finish}}}));
  };
  auto* choices = whole.if_contains("choices");
  if (!choices || !choices->is_array()) return {};
  for (const auto& v : choices->get_array()) {
    if (!v.is_object() || !v.get_object().contains("message")) return {};
    const auto& choice = v.get_object();
    const auto& index = choice.contains("index") ? choice.at("index") : json::value(0);
    const auto& message = choice.at("message").as_object();
    // (OpenAI's first chunk: the role, and "" where the answer is text)
    auto* content = message.if_contains("content");
    one(index, {{"role", "assistant"},
                {"content", content && content->is_string() ? json::value("") : nullptr}});
    for (auto key : {"reasoning_content", "content", "refusal"})
      for (auto piece : pieces_of(text_at(message, key))) one(index, {{key, piece}});
    if (auto* calls = message.if_contains("tool_calls"); calls && calls->is_array()) {
      std::int64_t n = 0;
      for (const auto& call : calls->get_array()) {
        if (!call.is_object()) continue;
        json::object c = call.get_object();
        c["index"] = n++;
        one(index, {{"tool_calls", json::array{std::move(c)}}});
      }
    }
    one(index, {}, choice.contains("finish_reason") ? choice.at("finish_reason") : nullptr);
  }
  auto usage = chunk(json::array{});
  usage["usage"] = whole.contains("usage") ? whole.at("usage") : nullptr;
  add_event(out, "", usage);
  return out += "data: [DONE]\n\n";
}

// One Anthropic content block: its start (empty), its deltas, its stop.
void anthropic_block(std::string& out, std::int64_t index, const json::object& block) {
  auto type = text_at(block, "type");
  json::object start = block;
  std::vector<json::object> deltas;
  if (type == "text") {
    start["text"] = "";
    start.erase("citations");
    for (auto piece : pieces_of(text_at(block, "text")))
      deltas.push_back({{"type", "text_delta"}, {"text", piece}});
  } else if (type == "thinking") {
    start["thinking"] = "";
    start["signature"] = "";
    for (auto piece : pieces_of(text_at(block, "thinking")))
      deltas.push_back({{"type", "thinking_delta"}, {"thinking", piece}});
    if (block.contains("signature"))
      deltas.push_back({{"type", "signature_delta"}, {"signature", block.at("signature")}});
  } else if (type == "tool_use" || type == "server_tool_use") {
    start["input"] = json::object{};
    deltas.push_back({{"type", "input_json_delta"},
                      {"partial_json", json::serialize(block.contains("input") ? block.at("input")
                                                                               : json::object{})}});
  }
  add_event(out, "content_block_start",
            {{"type", "content_block_start"}, {"index", index}, {"content_block", start}});
  for (auto& d : deltas)
    add_event(out, "content_block_delta",
              {{"type", "content_block_delta"}, {"index", index}, {"delta", std::move(d)}});
  if (auto* cites = block.if_contains("citations"); type == "text" && cites && cites->is_array())
    for (const auto& c : cites->get_array())
      add_event(out, "content_block_delta",
                {{"type", "content_block_delta"},
                 {"index", index},
                 {"delta", {{"type", "citations_delta"}, {"citation", c}}}});
  add_event(out, "content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
}

std::string anthropic_events(const json::object& whole) {
  auto* content = whole.if_contains("content");
  if (!content || !content->is_array()) return {};
  json::object opening = whole;
  opening["content"] = json::array{};
  opening["stop_reason"] = nullptr;
  opening["stop_sequence"] = nullptr;
  std::string out;
  add_event(out, "message_start", {{"type", "message_start"}, {"message", std::move(opening)}});
  std::int64_t index = 0;
  for (const auto& block : content->get_array())
    if (block.is_object()) anthropic_block(out, index++, block.get_object());
  json::object usage;
  if (auto* u = whole.if_contains("usage"); u && u->is_object()) usage = u->get_object();
  add_event(
      out, "message_delta",
      {{"type", "message_delta"},
       {"delta",
        {{"stop_reason", whole.contains("stop_reason") ? whole.at("stop_reason") : nullptr},
         {"stop_sequence", whole.contains("stop_sequence") ? whole.at("stop_sequence") : nullptr}}},
       {"usage", std::move(usage)}});
  add_event(out, "message_stop", {{"type", "message_stop"}});
  return out;
}

}  // namespace

std::string events_from_whole(dialect d, std::string_view whole) {
  boost::system::error_code ec;
  auto parsed = json::parse(whole, ec);
  if (ec || !parsed.is_object()) return {};
  if (d == dialect::openai_chat) return chat_events(parsed.get_object());
  if (d == dialect::anthropic_messages) return anthropic_events(parsed.get_object());
  if (d == dialect::openai_responses) return responses_events(parsed.get_object());
  return {};
}

}  // namespace tokengate::cache
