#include "translate/responses_from_anthropic.hpp"

#include "stream/json_fields.hpp"
#include "translate/chat_from_anthropic.hpp"
#include "translate/event_json.hpp"

namespace tokengate::translate {
namespace {

namespace json = boost::json;
using stream::json_fields::integer;
using stream::json_fields::obj;
using stream::json_fields::str;

}  // namespace

responses_from_anthropic::responses_from_anthropic(std::string model,
                                                   std::optional<std::int64_t> created_at,
                                                   std::string hex)
    : responses_from_chat(std::move(model), created_at, std::move(hex)) {}

void responses_from_anthropic::on_event(const stream::sse_event& event, std::string& out) {
  if (ended_) return;
  read_event_json(event.data, [&](const json::object* e) {
    if (!e) return;  // (nothing to translate; the accounting has noted it)
    auto type = str(*e, "type");
    if (type == "content_block_delta") {
      block_delta(*e, out);
    } else if (type == "content_block_start") {
      block_start(*e, out);
    } else if (type == "content_block_stop") {
      auto tool = tool_block_.find(integer(e, "index").value_or(-1));
      if (tool != tool_block_.end()) close_item(tool->second, out);
    } else if (type == "message_start") {
      message_start(*e, out);
    } else if (type == "message_delta") {
      message_delta(*e, out);
    } else if (type == "message_stop") {
      if (finish_reason_.empty()) finish_reason_ = "stop";
      end(out);
    } else if (type == "error" || event.type == "error") {
      auto* detail = obj(*e, "error");
      auto code = detail ? str(*detail, "type") : std::string_view();
      auto message = detail ? str(*detail, "message") : std::string_view();
      fail(code.empty() ? "api_error" : code, message.empty() ? "upstream error" : message, out);
    }
    // ping: no counterpart
  });
}

void responses_from_anthropic::read_anthropic_usage(const json::object* usage) {
  if (!usage) return;
  usage_seen_ = true;
  if (auto n = integer(usage, "input_tokens")) input_ = *n;
  if (auto n = integer(usage, "cache_read_input_tokens")) cache_read_ = *n;
  if (auto n = integer(usage, "cache_creation_input_tokens")) cache_written_ = *n;
  if (auto n = integer(usage, "output_tokens")) completion_ = *n;
  prompt_ = input_ + cache_read_ + cache_written_;  // (OpenAI counts cached tokens in)
  cached_ = cache_read_;
}

void responses_from_anthropic::message_start(const json::object& e, std::string& out) {
  json::object model;
  if (auto* m = obj(e, "message")) {
    read_anthropic_usage(obj(*m, "usage"));
    if (auto name = str(*m, "model"); !name.empty()) model["model"] = name;
  }
  if (!started_) start(&model, out);
}

void responses_from_anthropic::block_start(const json::object& e, std::string& out) {
  if (!started_) start(nullptr, out);
  auto* block = obj(e, "content_block");
  if (!block) return;
  auto type = str(*block, "type");
  if (type == "text") {
    if (auto text = str(*block, "text"); !text.empty())
      piece(running(item_kind::message, out), text, out);
  } else if (type == "tool_use") {
    if (running_ >= 0) close_item(running_, out);
    std::string call_id(str(*block, "id"));
    if (call_id.empty()) call_id = next_id("call_");
    tool_block_[integer(&e, "index").value_or(-1)] = open_item(
        item_kind::function_call, out, std::move(call_id), std::string(str(*block, "name")));
  }
  // thinking: its deltas carry it; server tools: no counterpart
}

void responses_from_anthropic::block_delta(const json::object& e, std::string& out) {
  auto* delta = obj(e, "delta");
  if (!delta) return;
  if (!started_) start(nullptr, out);
  auto type = str(*delta, "type");
  if (type == "text_delta") {
    if (auto text = str(*delta, "text"); !text.empty())
      piece(running(item_kind::message, out), text, out);
  } else if (type == "thinking_delta") {
    if (auto text = str(*delta, "thinking"); !text.empty())
      piece(running(item_kind::reasoning, out), text, out);
  } else if (type == "input_json_delta") {
    auto tool = tool_block_.find(integer(&e, "index").value_or(-1));
    auto fragment = str(*delta, "partial_json");
    if (tool != tool_block_.end() && !fragment.empty()) piece(tool->second, fragment, out);
  }
  // signature_delta, citations_delta: no counterpart
}

void responses_from_anthropic::message_delta(const json::object& e, std::string& out) {
  read_anthropic_usage(obj(e, "usage"));
  auto* delta = obj(e, "delta");
  auto stop = delta ? str(*delta, "stop_reason") : std::string_view();
  if (stop.empty() || !finish_reason_.empty()) return;
  finish_reason_ = finish_reason_for(stop);  // (in chat's words, which closing_status reads)
  close_all(out);
}

void responses_from_anthropic::whole(unsigned& status, std::string& body) {
  chat_from_anthropic(true, created_at_).whole(status, body);
  responses_from_chat(model_, created_at_, hex_).whole(status, body);
}

}  // namespace tokengate::translate
