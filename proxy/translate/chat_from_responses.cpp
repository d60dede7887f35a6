#include "translate/chat_from_responses.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <ctime>

#include "http/json_error.hpp"
#include "stream/error_event.hpp"
#include "stream/json_fields.hpp"
#include "translate/event_json.hpp"
#include "translate/json_out.hpp"

namespace tokengate::translate {
namespace {

namespace json = boost::json;
using stream::json_fields::arr;
using stream::json_fields::integer;
using stream::json_fields::obj;
using stream::json_fields::str;

// The finish_reason of an incomplete response, by why it stopped.
std::string_view finish_for_incomplete(const json::object* response) {
  auto* details = response ? obj(*response, "incomplete_details") : nullptr;
  return details && str(*details, "reason") == "content_filter" ? "content_filter" : "length";
}

// An error's type in OpenAI's words, from the code a Responses error has.
std::string_view type_for_code(std::string_view code) {
  if (code.find("rate_limit") != std::string_view::npos) return "requests";
  if (code.starts_with("invalid") || code.find("not_found") != std::string_view::npos)
    return "invalid_request_error";
  return "server_error";
}

struct whole_output {
  std::string text, refusal, reasoning;
  json::array calls;
};

// A response's output items as one chat message's parts.
whole_output read_output(const json::object& response) {
  whole_output o;
  auto* output = arr(response, "output");
  if (!output) return o;
  for (const auto& v : *output) {
    const auto* item = v.if_object();
    if (!item) continue;
    auto type = str(*item, "type");
    if (type == "message") {
      if (auto* content = arr(*item, "content"))
        for (const auto& p : *content)
          if (const auto* part = p.if_object()) {
            if (str(*part, "type") == "output_text") o.text += str(*part, "text");
            if (str(*part, "type") == "refusal") o.refusal += str(*part, "refusal");
          }
    } else if (type == "reasoning") {
      // (the summary is what a client is shown; the full text, where an
      // engine gives it, in its content)
      for (const char* key : {"summary", "content"})
        if (auto* parts = arr(*item, key))
          for (const auto& p : *parts)
            if (const auto* part = p.if_object()) o.reasoning += str(*part, "text");
    } else if (type == "function_call") {
      o.calls.push_back(json::object{
          {"id", str(*item, "call_id")},
          {"type", "function"},
          {"function", {{"name", str(*item, "name")}, {"arguments", str(*item, "arguments")}}}});
    }
  }
  return o;
}

}  // namespace

chat_from_responses::chat_from_responses(bool usage_asked, std::optional<std::int64_t> created)
    : usage_asked_(usage_asked),
      created_(std::to_string(created.value_or(static_cast<std::int64_t>(std::time(nullptr))))) {}

void chat_from_responses::on_event(const stream::sse_event& event, std::string& out) {
  if (done_) return;
  read_event_json(event.data, [&](const json::object* e) {
    if (!e) return;  // (nothing to translate; the accounting has noted it)
    auto type = str(*e, "type");
    if (type.empty()) type = event.type;
    this->event(type, *e, out);
  });
}

void chat_from_responses::event(std::string_view type, const json::object& e, std::string& out) {
  if (type == "response.output_text.delta") {
    text_chunk("content", str(e, "delta"), out);
  } else if (type == "response.reasoning_summary_text.delta" ||
             type == "response.reasoning_text.delta") {
    text_chunk("reasoning_content", str(e, "delta"), out);
  } else if (type == "response.function_call_arguments.delta") {
    arguments(e, out);
  } else if (type == "response.refusal.delta") {
    text_chunk("refusal", str(e, "delta"), out);
  } else if (type == "response.output_item.added") {
    item_added(e, out);
  } else if (type == "response.output_item.done") {
    item_done(e, out);
  } else if (type == "response.created" || type == "response.in_progress") {
    if (!started_) start(obj(e, "response"), out);
  } else if (type == "response.completed") {
    finish(obj(e, "response"), tools_ > 0 ? "tool_calls" : "stop", out);
  } else if (type == "response.incomplete") {
    finish(obj(e, "response"), finish_for_incomplete(obj(e, "response")), out);
  } else if (type == "response.failed") {
    auto* response = obj(e, "response");
    failed(response ? obj(*response, "error") : nullptr, out);
  } else if (type == "error") {
    failed(&e, out);
  }
}

void chat_from_responses::start(const json::object* response, std::string& out) {
  started_ = true;
  if (response) {
    if (auto id = str(*response, "id"); !id.empty()) id_ = "chatcmpl-" + std::string(id);
    model_ = str(*response, "model");
  }
  open_chunk(out);
  out.append("{\"role\":\"assistant\",\"content\":\"\"}");
  close_chunk(out, {});
}

void chat_from_responses::item_added(const json::object& e, std::string& out) {
  auto* item = obj(e, "item");
  if (!item || str(*item, "type") != "function_call") return;
  if (!started_) start(nullptr, out);
  int tool = tools_++;
  auto arguments = str(*item, "arguments");
  tool_index_[integer(&e, "output_index").value_or(-1)] = {tool, !arguments.empty()};
  open_chunk(out);
  out.append("{\"tool_calls\":[{\"index\":").append(std::to_string(tool)).append(",\"id\":");
  append_json_string(out, str(*item, "call_id"));
  out.append(",\"type\":\"function\",\"function\":{\"name\":");
  append_json_string(out, str(*item, "name"));
  out.append(",\"arguments\":");
  append_json_string(out, arguments);
  out.append("}}]}");
  close_chunk(out, {});
}

// A call whose arguments came whole in its item, not in deltas (some
// engines stream no argument deltas): they are told here.
void chat_from_responses::item_done(const json::object& e, std::string& out) {
  auto* item = obj(e, "item");
  auto tool = tool_index_.find(integer(&e, "output_index").value_or(-1));
  if (!item || tool == tool_index_.end() || tool->second.streamed) return;
  argument_fragment(tool->second, str(*item, "arguments"), out);
}

void chat_from_responses::arguments(const json::object& e, std::string& out) {
  auto tool = tool_index_.find(integer(&e, "output_index").value_or(-1));
  if (tool != tool_index_.end()) argument_fragment(tool->second, str(e, "delta"), out);
}

void chat_from_responses::argument_fragment(call& c, std::string_view fragment, std::string& out) {
  if (fragment.empty()) return;
  c.streamed = true;
  open_chunk(out);
  out.append("{\"tool_calls\":[{\"index\":")
      .append(std::to_string(c.index))
      .append(",\"function\":{\"arguments\":");
  append_json_string(out, fragment);
  out.append("}}]}");
  close_chunk(out, {});
}

void chat_from_responses::text_chunk(std::string_view member, std::string_view text,
                                     std::string& out) {
  if (text.empty()) return;
  if (!started_) start(nullptr, out);
  open_chunk(out);
  out.append("{\"").append(member).append("\":");
  append_json_string(out, text);
  out.push_back('}');
  close_chunk(out, {});
}

void chat_from_responses::read_usage(const json::object* usage) {
  if (!usage) return;
  if (auto n = integer(usage, "input_tokens")) input_ = *n;
  if (auto n = integer(usage, "output_tokens")) output_ = *n;
  if (auto* d = obj(*usage, "input_tokens_details"))
    if (auto n = integer(d, "cached_tokens")) cached_ = *n;
  if (auto* d = obj(*usage, "output_tokens_details"))
    if (auto n = integer(d, "reasoning_tokens")) reasoning_ = *n;
}

void chat_from_responses::finish(const json::object* response, std::string_view finish_reason,
                                 std::string& out) {
  if (!started_) start(response, out);
  if (response) read_usage(obj(*response, "usage"));
  done_ = true;
  open_chunk(out);
  out.append("{}");
  close_chunk(out, finish_reason);
  if (usage_asked_) usage_chunk(out);
  out.append("data: [DONE]\n\n");
}

void chat_from_responses::failed(const json::object* error, std::string& out) {
  done_ = true;
  auto code = error ? str(*error, "code") : std::string_view();
  auto message = error ? str(*error, "message") : std::string_view();
  if (code.empty() && error) code = str(*error, "type");
  if (code.empty()) code = "server_error";
  out.append(stream::make_error_event(dialect::openai_chat, type_for_code(code), code,
                                      message.empty() ? "upstream error" : message));
}

// A chunk's event up to its choices: its id, object, time and model.
void chat_from_responses::chunk_header(std::string& out) {
  begin_data(out);
  out.append("{\"id\":");
  append_json_string(out, id_);
  out.append(",\"object\":\"chat.completion.chunk\",\"created\":").append(created_);
  out.append(",\"model\":");
  append_json_string(out, model_);
}

void chat_from_responses::open_chunk(std::string& out) {
  chunk_header(out);
  out.append(",\"choices\":[{\"index\":0,\"delta\":");
}

void chat_from_responses::close_chunk(std::string& out, std::string_view finish_reason) {
  out.append(",\"logprobs\":null,\"finish_reason\":");
  if (finish_reason.empty())
    out.append("null");
  else
    append_json_string(out, finish_reason);
  out.append("}]}");
  end_event(out);
}

void chat_from_responses::usage_chunk(std::string& out) {
  chunk_header(out);
  out.append(",\"choices\":[],\"usage\":{\"prompt_tokens\":").append(std::to_string(input_));
  out.append(",\"completion_tokens\":").append(std::to_string(output_));
  out.append(",\"total_tokens\":").append(std::to_string(input_ + output_));
  out.append(",\"prompt_tokens_details\":{\"cached_tokens\":").append(std::to_string(cached_));
  out.append("},\"completion_tokens_details\":{\"reasoning_tokens\":")
      .append(std::to_string(reasoning_))
      .append("}}}");
  end_event(out);
}

void chat_from_responses::on_end(std::string& out) {
  if (done_ || !started_) return;
  // A Responses stream ends with its terminal event: one that stops
  // before it was broken, and is not told as a finished answer.
  failed(nullptr, out);
}

void chat_from_responses::on_cut(long long limit, std::string& out) {
  if (done_) return;
  output_ = limit;
  finish(nullptr, "length", out);
}

void chat_from_responses::on_failure(const request_error& why, std::string& out) {
  if (done_) return;
  done_ = true;
  out.append(stream::make_error_event(
      dialect::openai_chat, "server_error",
      why.code.empty() ? std::string_view("server_error") : std::string_view(why.code),
      why.message));
}

void chat_from_responses::whole(unsigned& status, std::string& body) {
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  if (status >= 400) {  // (an OpenAI error is the same in both APIs)
    if (ec || !parsed.is_object())
      body = json_error_body("upstream answered " + std::to_string(status), "server_error",
                             "upstream_error");
    return;
  }
  const auto* response = !ec && parsed.is_object() ? &parsed.get_object() : nullptr;
  if (!response || str(*response, "object") != "response") {
    status = 502;
    body = R"({"error":{"message":"upstream sent an answer that is not a response",)"
           R"("type":"server_error","param":null,"code":"upstream_invalid_answer"}})";
    return;
  }
  auto state = str(*response, "status");
  if (state == "failed") {
    auto* error = obj(*response, "error");
    auto code = error ? str(*error, "code") : std::string_view();
    status = 500;
    body = json_error_body(error && !str(*error, "message").empty()
                               ? std::string(str(*error, "message"))
                               : std::string("upstream failed to answer"),
                           "server_error", code.empty() ? "server_error" : code);
    return;
  }
  read_usage(obj(*response, "usage"));
  auto o = read_output(*response);
  json::object message{
      {"role", "assistant"},
      {"content", o.text.empty() && !o.calls.empty() ? json::value() : json::value(o.text)}};
  if (!o.refusal.empty()) message["refusal"] = o.refusal;
  if (!o.reasoning.empty()) message["reasoning_content"] = o.reasoning;
  std::string_view finish = state == "incomplete" ? finish_for_incomplete(response)
                            : o.calls.empty()     ? "stop"
                                                  : "tool_calls";
  if (!o.calls.empty()) message["tool_calls"] = std::move(o.calls);
  json::object answer{{"id", "chatcmpl-" + std::string(str(*response, "id"))},
                      {"object", "chat.completion"},
                      {"created", std::stoll(created_)},
                      {"model", str(*response, "model")},
                      {"choices", json::array{json::object{{"index", 0},
                                                           {"message", std::move(message)},
                                                           {"logprobs", nullptr},
                                                           {"finish_reason", finish}}}},
                      {"usage",
                       {{"prompt_tokens", input_},
                        {"completion_tokens", output_},
                        {"total_tokens", input_ + output_},
                        {"prompt_tokens_details", {{"cached_tokens", cached_}}},
                        {"completion_tokens_details", {{"reasoning_tokens", reasoning_}}}}}};
  body = json::serialize(answer);
}

}  // namespace tokengate::translate
