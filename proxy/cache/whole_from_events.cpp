// A stored stream added up to its dialect's whole answer (cache/forms.hpp).
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <map>

#include "cache/forms.hpp"
#include "stream/sse_parser.hpp"

namespace tokengate::cache {
namespace {

namespace json = boost::json;

// Each event's data parsed as a JSON object, with its type ("message"
// when the stream names none); what is not an object is skipped.
template <typename Take>
void each_event(std::string_view events, Take take) {
  struct sink final : stream::sse_sink {
    Take* take;
    void on_event(const stream::sse_event& event) override {
      boost::system::error_code ec;
      auto v = json::parse(event.data, ec);
      if (!ec && v.is_object()) (*take)(event.type, v.get_object());
    }
  } s;
  s.take = &take;
  stream::sse_parser parser;
  parser.feed(events, s);
}

void append_text(json::object& into, std::string_view key, const json::value* piece) {
  if (!piece || !piece->is_string()) return;
  auto& slot = into[key];
  if (!slot.is_string()) slot = "";
  slot.get_string().append(piece->get_string());
}

// One chat choice as its chunks' deltas add up.
struct chat_choice {
  json::object message{{"role", "assistant"}, {"content", nullptr}};
  std::map<std::int64_t, json::object> calls;  // by the call's index
  json::value finish = nullptr;
  json::value logprobs = nullptr;
};

void add_call_delta(chat_choice& c, const json::object& call) {
  auto* index = call.if_contains("index");
  auto& into = c.calls[index && index->is_int64() ? index->get_int64() : 0];
  for (auto key : {"id", "type"})
    if (auto* v = call.if_contains(key)) into[key] = *v;
  auto* fn = call.if_contains("function");
  if (!fn || !fn->is_object()) return;
  if (!into.contains("function")) into["function"] = json::object{{"name", ""}, {"arguments", ""}};
  auto& target = into["function"].get_object();
  if (auto* name = fn->get_object().if_contains("name"); name && name->is_string())
    target["name"] = *name;
  append_text(target, "arguments", fn->get_object().if_contains("arguments"));
}

void add_chat_delta(chat_choice& c, const json::object& choice) {
  if (auto* f = choice.if_contains("finish_reason"); f && !f->is_null()) c.finish = *f;
  if (auto* l = choice.if_contains("logprobs"); l && !l->is_null()) c.logprobs = *l;
  auto* d = choice.if_contains("delta");
  if (!d || !d->is_object()) return;
  const auto& delta = d->get_object();
  if (auto* role = delta.if_contains("role"); role && role->is_string()) c.message["role"] = *role;
  for (auto key : {"content", "reasoning_content", "refusal"})
    append_text(c.message, key, delta.if_contains(key));
  if (auto* calls = delta.if_contains("tool_calls"); calls && calls->is_array())
    for (const auto& call : calls->get_array())
      if (call.is_object()) add_call_delta(c, call.get_object());
}

std::string chat_whole(std::string_view events) {
  json::object whole{{"id", ""}, {"object", "chat.completion"}, {"created", 0}, {"model", ""}};
  std::map<std::int64_t, chat_choice> choices;
  json::value usage = nullptr;
  each_event(events, [&](std::string_view, const json::object& chunk) {
    for (auto key : {"id", "created", "model", "system_fingerprint", "service_tier"})
      if (auto* v = chunk.if_contains(key); v && !v->is_null()) whole[key] = *v;
    if (auto* u = chunk.if_contains("usage"); u && !u->is_null()) usage = *u;
    if (auto* list = chunk.if_contains("choices"); list && list->is_array())
      for (const auto& choice : list->get_array()) {
        if (!choice.is_object()) continue;
        auto* index = choice.get_object().if_contains("index");
        add_chat_delta(choices[index && index->is_int64() ? index->get_int64() : 0],
                       choice.get_object());
      }
  });
  if (choices.empty()) return {};
  json::array out;
  for (auto& [index, c] : choices) {
    if (!c.calls.empty()) {
      json::array calls;
      for (auto& [_, call] : c.calls) calls.push_back(std::move(call));
      c.message["tool_calls"] = std::move(calls);
    }
    out.push_back(json::object{{"index", index},
                               {"message", std::move(c.message)},
                               {"logprobs", std::move(c.logprobs)},
                               {"finish_reason", std::move(c.finish)}});
  }
  whole["choices"] = std::move(out);
  whole["usage"] = std::move(usage);
  return json::serialize(whole);
}

// Anthropic: message_start's message, each block as its deltas add up,
// message_delta's stop and usage over it.
void add_anthropic_delta(json::object& block, const json::object& delta, std::string& partial) {
  auto* type = delta.if_contains("type");
  std::string_view kind = type && type->is_string() ? std::string_view(type->get_string()) : "";
  if (kind == "text_delta") append_text(block, "text", delta.if_contains("text"));
  if (kind == "thinking_delta") append_text(block, "thinking", delta.if_contains("thinking"));
  if (kind == "signature_delta") append_text(block, "signature", delta.if_contains("signature"));
  if (auto* p = delta.if_contains("partial_json");
      kind == "input_json_delta" && p && p->is_string())
    partial.append(p->get_string());
  if (auto* c = delta.if_contains("citation"); kind == "citations_delta" && c) {
    if (!block.contains("citations") || !block["citations"].is_array())
      block["citations"] = json::array{};
    block["citations"].get_array().push_back(*c);
  }
}

std::string anthropic_whole(std::string_view events) {
  json::object message;
  std::map<std::int64_t, std::pair<json::object, std::string>> blocks;  // block, its input's JSON
  each_event(events, [&](std::string_view, const json::object& e) {
    auto* type = e.if_contains("type");
    if (!type || !type->is_string()) return;
    auto* index = e.if_contains("index");
    auto at = index && index->is_int64() ? index->get_int64() : 0;
    if (*type == "message_start" && e.contains("message") && e.at("message").is_object())
      message = e.at("message").get_object();
    if (*type == "content_block_start" && e.contains("content_block") &&
        e.at("content_block").is_object())
      blocks[at].first = e.at("content_block").get_object();
    if (*type == "content_block_delta" && e.contains("delta") && e.at("delta").is_object())
      add_anthropic_delta(blocks[at].first, e.at("delta").get_object(), blocks[at].second);
    if (*type != "message_delta") return;
    if (auto* d = e.if_contains("delta"); d && d->is_object())
      for (const auto& [k, v] : d->get_object()) message[k] = v;
    auto* u = e.if_contains("usage");
    if (!u || !u->is_object()) return;
    if (!message.contains("usage") || !message["usage"].is_object())
      message["usage"] = json::object{};
    for (const auto& [k, v] : u->get_object()) message["usage"].get_object()[k] = v;
  });
  if (message.empty()) return {};
  json::array content;
  for (auto& [_, b] : blocks) {
    boost::system::error_code ec;
    if (!b.second.empty())
      if (auto input = json::parse(b.second, ec); !ec) b.first["input"] = std::move(input);
    content.push_back(std::move(b.first));
  }
  message["content"] = std::move(content);
  return json::serialize(message);
}

// The Responses API ends its stream with the whole response.
std::string responses_whole(std::string_view events) {
  std::string whole;
  each_event(events, [&](std::string_view, const json::object& e) {
    auto* type = e.if_contains("type");
    if (!type || *type != "response.completed") return;
    if (auto* r = e.if_contains("response"); r && r->is_object()) whole = json::serialize(*r);
  });
  return whole;
}

}  // namespace

bool shares_forms(dialect d) {
  return d == dialect::openai_chat || d == dialect::anthropic_messages ||
         d == dialect::openai_responses;
}

std::shared_ptr<const entry> in_form(std::shared_ptr<const entry> e, bool streamed) {
  if (!e || e->streamed == streamed) return e;
  if (!shares_forms(e->dialect)) return nullptr;
  auto body =
      streamed ? events_from_whole(e->dialect, e->body) : whole_from_events(e->dialect, e->body);
  if (body.empty()) return nullptr;
  auto copy = std::make_shared<entry>();
  copy->route = e->route;
  copy->body = std::move(body);
  copy->streamed = streamed;
  copy->dialect = e->dialect;
  copy->input_tokens = e->input_tokens;
  copy->output_tokens = e->output_tokens;
  copy->stored = e->stored;
  copy->expires = e->expires;
  copy->content_type = streamed ? "text/event-stream" : "application/json";
  return copy;
}

std::string whole_from_events(dialect d, std::string_view events) {
  if (d == dialect::openai_chat) return chat_whole(events);
  if (d == dialect::anthropic_messages) return anthropic_whole(events);
  if (d == dialect::openai_responses) return responses_whole(events);
  return {};
}

}  // namespace tokengate::cache
