#include "translate/chat_from_anthropic.hpp"

#include <boost/json/serialize.hpp>
#include <ctime>

#include "stream/json_fields.hpp"
#include "translate/errors.hpp"
#include "translate/event_json.hpp"
#include "translate/json_out.hpp"

namespace tokengate::translate {
namespace {

namespace json = boost::json;
using stream::json_fields::integer;
using stream::json_fields::obj;
using stream::json_fields::str;

std::string now_seconds() { return std::to_string(static_cast<long long>(std::time(nullptr))); }

// A message's content blocks as a chat completion's message: its text,
// its thinking as reasoning_content, its tool_use blocks as tool calls.
json::object chat_message_of(const json::object& m) {
  std::string text, reasoning;
  json::array calls;
  if (auto* content = stream::json_fields::arr(m, "content"))
    for (const auto& b : *content) {
      if (!b.is_object()) continue;
      const auto& block = b.get_object();
      auto type = str(block, "type");
      if (type == "text") text += str(block, "text");
      if (type == "thinking") reasoning += str(block, "thinking");
      if (type == "tool_use") {
        const auto* input = block.if_contains("input");
        calls.push_back(
            json::object{{"id", str(block, "id")},
                         {"type", "function"},
                         {"function",
                          {{"name", str(block, "name")},
                           {"arguments", input ? json::serialize(*input) : std::string("{}")}}}});
      }
    }
  json::object message{
      {"role", "assistant"},
      {"content", text.empty() && !calls.empty() ? json::value() : json::value(text)}};
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  return message;
}

}  // namespace

std::string_view finish_reason_for(std::string_view stop_reason) {
  if (stop_reason == "max_tokens" || stop_reason == "model_context_window_exceeded")
    return "length";
  if (stop_reason == "tool_use") return "tool_calls";
  if (stop_reason == "refusal") return "content_filter";
  return "stop";  // end_turn, stop_sequence, pause_turn
}

chat_from_anthropic::chat_from_anthropic(bool usage_asked, std::optional<std::int64_t> created)
    : usage_asked_(usage_asked), created_(created ? std::to_string(*created) : now_seconds()) {}

void chat_from_anthropic::on_event(const stream::sse_event& event, std::string& out) {
  read_event_json(event.data, [&](const json::object* e) {
    if (!e) return;  // (nothing to translate; the accounting has noted it)
    auto type = str(*e, "type");
    if (type == "content_block_delta")
      block_delta(*e, out);
    else if (type == "content_block_start")
      block_start(*e, out);
    else if (type == "message_start")
      message_start(*e, out);
    else if (type == "message_delta")
      message_delta(*e, out);
    else if (type == "message_stop")
      message_stop(out);
    else if (type == "error" || event.type == "error") {
      auto* detail = obj(*e, "error");
      out.append(openai_error_event(detail ? str(*detail, "type") : "api_error",
                                    detail ? str(*detail, "message") : "upstream error"));
      done_ = true;
    }
    // ping, content_block_stop: no counterpart
  });
}

// A chunk's event up to its choices: its id, object, time and model.
void chat_from_anthropic::chunk_header(std::string& out) {
  begin_data(out);
  out.append("{\"id\":");
  append_json_string(out, id_);
  out.append(",\"object\":\"chat.completion.chunk\",\"created\":").append(created_);
  out.append(",\"model\":");
  append_json_string(out, model_);
}

void chat_from_anthropic::open_chunk(std::string& out) {
  chunk_header(out);
  out.append(",\"choices\":[{\"index\":0,\"delta\":");
}

void chat_from_anthropic::close_chunk(std::string& out, std::string_view finish_reason) {
  out.append(",\"logprobs\":null,\"finish_reason\":");
  if (finish_reason.empty())
    out.append("null");
  else
    append_json_string(out, finish_reason);
  out.append("}]}");
  end_event(out);
}

void chat_from_anthropic::read_usage(const json::object* usage) {
  if (!usage) return;
  if (auto n = integer(usage, "input_tokens")) input_ = *n;
  if (auto n = integer(usage, "cache_read_input_tokens")) cache_read_ = *n;
  if (auto n = integer(usage, "cache_creation_input_tokens")) cache_written_ = *n;
  if (auto n = integer(usage, "output_tokens")) output_ = *n;
}

void chat_from_anthropic::message_start(const json::object& e, std::string& out) {
  if (auto* m = obj(e, "message")) {
    if (auto id = str(*m, "id"); !id.empty()) id_ = "chatcmpl-" + std::string(id);
    model_ = str(*m, "model");
    read_usage(obj(*m, "usage"));
  }
  open_chunk(out);
  out.append("{\"role\":\"assistant\",\"content\":\"\"}");
  close_chunk(out, {});
}

void chat_from_anthropic::block_start(const json::object& e, std::string& out) {
  auto* block = obj(e, "content_block");
  if (!block) return;
  auto type = str(*block, "type");
  if (type == "text") {
    if (auto text = str(*block, "text"); !text.empty()) {
      open_chunk(out);
      out.append("{\"content\":");
      append_json_string(out, text);
      out.push_back('}');
      close_chunk(out, {});
    }
    return;
  }
  if (type != "tool_use") return;  // thinking: its deltas carry it; server tools: none
  auto index = integer(&e, "index").value_or(0);
  int tool = tools_++;
  tool_index_[index] = tool;
  open_chunk(out);
  out.append("{\"tool_calls\":[{\"index\":").append(std::to_string(tool)).append(",\"id\":");
  append_json_string(out, str(*block, "id"));
  out.append(",\"type\":\"function\",\"function\":{\"name\":");
  append_json_string(out, str(*block, "name"));
  out.append(",\"arguments\":\"\"}}]}");
  close_chunk(out, {});
}

void chat_from_anthropic::block_delta(const json::object& e, std::string& out) {
  auto* delta = obj(e, "delta");
  if (!delta) return;
  auto type = str(*delta, "type");
  if (type == "text_delta" || type == "thinking_delta") {
    bool text = type == "text_delta";
    auto piece = str(*delta, text ? "text" : "thinking");
    if (piece.empty()) return;
    open_chunk(out);
    out.append(text ? "{\"content\":" : "{\"reasoning_content\":");
    append_json_string(out, piece);
    out.push_back('}');
    close_chunk(out, {});
  } else if (type == "input_json_delta") {
    auto fragment = str(*delta, "partial_json");
    auto tool = tool_index_.find(integer(&e, "index").value_or(0));
    if (fragment.empty() || tool == tool_index_.end()) return;
    open_chunk(out);
    out.append("{\"tool_calls\":[{\"index\":")
        .append(std::to_string(tool->second))
        .append(",\"function\":{\"arguments\":");
    append_json_string(out, fragment);
    out.append("}}]}");
    close_chunk(out, {});
  }
  // signature_delta, citations_delta: no counterpart
}

void chat_from_anthropic::message_delta(const json::object& e, std::string& out) {
  read_usage(obj(e, "usage"));
  auto* delta = obj(e, "delta");
  auto stop = delta ? str(*delta, "stop_reason") : std::string_view();
  if (stop.empty() || finished_) return;
  finished_ = true;
  open_chunk(out);
  out.append("{}");
  close_chunk(out, finish_reason_for(stop));
}

void chat_from_anthropic::usage_chunk(std::string& out) {
  auto prompt = input_ + cache_read_ + cache_written_;  // OpenAI counts cached tokens in
  chunk_header(out);
  out.append(",\"choices\":[],\"usage\":{\"prompt_tokens\":").append(std::to_string(prompt));
  out.append(",\"completion_tokens\":").append(std::to_string(output_));
  out.append(",\"total_tokens\":").append(std::to_string(prompt + output_));
  out.append(",\"prompt_tokens_details\":{\"cached_tokens\":")
      .append(std::to_string(cache_read_))
      .append("}}}");
  end_event(out);
}

void chat_from_anthropic::message_stop(std::string& out) {
  if (done_) return;
  done_ = true;
  if (usage_asked_) usage_chunk(out);
  out.append("data: [DONE]\n\n");
}

void chat_from_anthropic::on_end(std::string& out) {
  if (finished_) message_stop(out);
}

void chat_from_anthropic::on_cut(long long limit, std::string& out) {
  if (done_) return;
  output_ = limit;
  if (!finished_) {
    finished_ = true;
    open_chunk(out);
    out.append("{}");
    close_chunk(out, "length");
  }
  message_stop(out);
}

void chat_from_anthropic::on_failure(const request_error& why, std::string& out) {
  if (done_) return;
  done_ = true;
  out.append(openai_error_event(why.code == "upstream_timeout" ? "timeout_error" : "api_error",
                                why.message));
}

void chat_from_anthropic::whole(unsigned& status, std::string& body) {
  if (status >= 400) {
    anthropic_error_to_openai(status, body);
    return;
  }
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  if (ec || !parsed.is_object()) {  // not a message: said as an error, not passed on as one
    status = 502;
    body = R"({"error":{"message":"upstream sent an answer that is not a message","type":)"
           R"("server_error","param":null,"code":"upstream_invalid_answer"}})";
    return;
  }
  const auto& m = parsed.get_object();
  read_usage(obj(m, "usage"));
  auto prompt = input_ + cache_read_ + cache_written_;
  json::object answer{
      {"id", "chatcmpl-" + std::string(str(m, "id"))},
      {"object", "chat.completion"},
      {"created", std::stoll(created_)},
      {"model", str(m, "model")},
      {"choices",
       json::array{json::object{{"index", 0},
                                {"message", chat_message_of(m)},
                                {"logprobs", nullptr},
                                {"finish_reason", finish_reason_for(str(m, "stop_reason"))}}}},
      {"usage",
       {{"prompt_tokens", prompt},
        {"completion_tokens", output_},
        {"total_tokens", prompt + output_},
        {"prompt_tokens_details", {{"cached_tokens", cache_read_}}}}}};
  body = json::serialize(answer);
}

}  // namespace tokengate::translate
