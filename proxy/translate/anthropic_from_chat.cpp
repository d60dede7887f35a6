#include "translate/anthropic_from_chat.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "stream/json_fields.hpp"
#include "translate/errors.hpp"
#include "translate/event_json.hpp"
#include "translate/json_out.hpp"

namespace tokengate::translate {
namespace {

namespace json = boost::json;
using stream::json_fields::arr;
using stream::json_fields::chat_reasoning;
using stream::json_fields::integer;
using stream::json_fields::obj;
using stream::json_fields::str;

}  // namespace

std::string_view stop_reason_for(std::string_view finish_reason) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls" || finish_reason == "function_call") return "tool_use";
  if (finish_reason == "content_filter") return "refusal";
  return "end_turn";
}

anthropic_from_chat::anthropic_from_chat(std::string model) : model_(std::move(model)) {}

void anthropic_from_chat::on_event(const stream::sse_event& event, std::string& out) {
  if (stopped_) return;
  if (event.data == "[DONE]") {
    if (stop_reason_.empty()) {
      // [DONE] with no finish: engines send it after an error too. Not
      // told as a complete message.
      stopped_ = true;
      out.append(anthropic_error_event("api_error", "",
                                       "upstream ended its stream without finishing the message"));
      return;
    }
    stop(out);
    return;
  }
  read_event_json(event.data, [&](const json::object* c) {
    if (!c) return;
    if (auto* e = c->if_contains("error"); e && !e->is_null()) {
      error(*c, out);
      return;
    }
    chunk(*c, out);
  });
}

void anthropic_from_chat::chunk(const json::object& c, std::string& out) {
  if (!started_) start_message(c, out);
  read_usage(obj(c, "usage"));
  auto* choices = arr(c, "choices");
  if (!choices) return;
  for (const auto& choice : *choices) {
    if (!choice.is_object()) continue;
    const auto& ch = choice.get_object();
    if (integer(&ch, "index").value_or(0) != 0) continue;  // (one message: n = 1)
    if (auto* d = obj(ch, "delta")) delta(*d, out);
    if (auto finish = str(ch, "finish_reason"); !finish.empty()) {
      close_block(out);
      stop_reason_ = stop_reason_for(finish);
    }
  }
}

void anthropic_from_chat::start_message(const json::object& c, std::string& out) {
  started_ = true;
  if (auto model = str(c, "model"); !model.empty()) model_ = model;
  auto id = str(c, "id");
  begin_event(out, "message_start");
  out.append("{\"type\":\"message_start\",\"message\":{\"id\":");
  append_json_string(out, "msg_" + std::string(id.empty() ? "tokengate" : id));
  out.append(",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
  append_json_string(out, model_);
  out.append(
      ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":");
  // (OpenAI's stream tells the prompt's size at its end: message_delta says it)
  out.append(std::to_string(prompt_ - cached_)).append(",\"output_tokens\":0}}}");
  end_event(out);
}

void anthropic_from_chat::delta(const json::object& d, std::string& out) {
  if (auto reasoning = chat_reasoning(d); !reasoning.empty()) {
    if (open_ != block::thinking) open_block(block::thinking, out);
    block_delta(open_index_, "thinking_delta", "thinking", reasoning, out);
  }
  if (auto text = str(d, "content"); !text.empty()) {
    if (open_ != block::text) open_block(block::text, out);
    block_delta(open_index_, "text_delta", "text", text, out);
  }
  if (auto* calls = arr(d, "tool_calls"))
    for (const auto& call : *calls)
      if (call.is_object()) tool_call(call.get_object(), out);
}

void anthropic_from_chat::tool_call(const json::object& call, std::string& out) {
  auto index = integer(&call, "index").value_or(0);
  auto* function = obj(call, "function");
  auto name = function ? str(*function, "name") : std::string_view();
  auto found = tool_block_.find(index);
  if (found == tool_block_.end()) {
    if (name.empty()) return;  // (fragments of a call never opened)
    open_block(block::tool, out, str(call, "id"), name);
    found = tool_block_.emplace(index, open_index_).first;
  }
  auto arguments = function ? str(*function, "arguments") : std::string_view();
  if (!arguments.empty())
    block_delta(found->second, "input_json_delta", "partial_json", arguments, out);
}

void anthropic_from_chat::open_block(block kind, std::string& out, std::string_view tool_id,
                                     std::string_view tool_name) {
  close_block(out);
  open_ = kind;
  open_index_ = blocks_++;
  begin_event(out, "content_block_start");
  out.append("{\"type\":\"content_block_start\",\"index\":")
      .append(std::to_string(open_index_))
      .append(",\"content_block\":");
  if (kind == block::text) {
    out.append("{\"type\":\"text\",\"text\":\"\"}}");
  } else if (kind == block::thinking) {
    out.append("{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}");
  } else {
    out.append("{\"type\":\"tool_use\",\"id\":");
    append_json_string(
        out, tool_id.empty() ? "toolu_" + std::to_string(open_index_) : std::string(tool_id));
    out.append(",\"name\":");
    append_json_string(out, tool_name);
    out.append(",\"input\":{}}}");
  }
  end_event(out);
}

void anthropic_from_chat::close_block(std::string& out) {
  if (open_ == block::none) return;
  begin_event(out, "content_block_stop");
  out.append("{\"type\":\"content_block_stop\",\"index\":")
      .append(std::to_string(open_index_))
      .append("}");
  end_event(out);
  open_ = block::none;
}

void anthropic_from_chat::block_delta(int index, std::string_view type, std::string_view field,
                                      std::string_view piece, std::string& out) {
  begin_event(out, "content_block_delta");
  out.append("{\"type\":\"content_block_delta\",\"index\":")
      .append(std::to_string(index))
      .append(",\"delta\":{\"type\":\"")
      .append(type)
      .append("\",\"")
      .append(field)
      .append("\":");
  append_json_string(out, piece);
  out.append("}}");
  end_event(out);
}

void anthropic_from_chat::read_usage(const json::object* usage) {
  if (!usage) return;
  if (auto n = integer(usage, "prompt_tokens")) prompt_ = *n;
  if (auto n = integer(usage, "completion_tokens")) output_ = *n;
  if (auto* details = obj(*usage, "prompt_tokens_details"))
    if (auto n = integer(details, "cached_tokens")) cached_ = *n;
}

void anthropic_from_chat::stop(std::string& out) {
  if (stopped_) return;
  stopped_ = true;
  close_block(out);
  begin_event(out, "message_delta");
  out.append("{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":");
  append_json_string(out, stop_reason_.empty() ? "end_turn" : stop_reason_);
  out.append(",\"stop_sequence\":null},\"usage\":{\"input_tokens\":")
      .append(std::to_string(prompt_ - cached_))
      .append(",\"cache_read_input_tokens\":")
      .append(std::to_string(cached_))
      .append(",\"output_tokens\":")
      .append(std::to_string(output_))
      .append("}}");
  end_event(out);
  begin_event(out, "message_stop");
  out.append("{\"type\":\"message_stop\"}");
  end_event(out);
}

void anthropic_from_chat::error(const json::object& c, std::string& out) {
  stopped_ = true;
  const auto& e = c.at("error");
  if (e.is_object())
    out.append(anthropic_error_event(str(e.get_object(), "type"), str(e.get_object(), "code"),
                                     str(e.get_object(), "message")));
  else
    out.append(anthropic_error_event(
        "", "",
        e.is_string() ? std::string_view(e.get_string()) : std::string_view("upstream error")));
}

void anthropic_from_chat::on_end(std::string& out) {
  if (started_ && !stop_reason_.empty()) stop(out);
}

void anthropic_from_chat::on_cut(long long limit, std::string& out) {
  if (stopped_) return;
  if (!started_) {
    json::object none;
    start_message(none, out);
  }
  output_ = limit;
  stop_reason_ = "max_tokens";
  stop(out);
}

void anthropic_from_chat::on_failure(const request_error& why, std::string& out) {
  if (stopped_) return;
  stopped_ = true;
  out.append(anthropic_error_event(why.code == "upstream_timeout" ? "timeout" : "api_error",
                                   why.code, why.message));
}

void anthropic_from_chat::whole(unsigned& status, std::string& body) {
  if (status >= 400) {
    openai_error_to_anthropic(status, body);
    return;
  }
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  const json::object* choice0 = nullptr;
  if (!ec && parsed.is_object())
    if (auto* choices = arr(parsed.get_object(), "choices"); choices && !choices->empty())
      if (choices->front().is_object()) choice0 = &choices->front().get_object();
  if (!choice0) {
    status = 502;
    body = R"({"type":"error","error":{"type":"api_error","message":)"
           R"("upstream sent an answer that is not a chat completion"}})";
    return;
  }
  const auto& c = parsed.get_object();
  read_usage(obj(c, "usage"));
  json::array content;
  if (auto* m = obj(*choice0, "message")) {
    if (auto r = chat_reasoning(*m); !r.empty())
      content.push_back(json::object{{"type", "thinking"}, {"thinking", r}, {"signature", ""}});
    if (auto text = str(*m, "content"); !text.empty())
      content.push_back(json::object{{"type", "text"}, {"text", text}});
    if (auto* calls = arr(*m, "tool_calls"))
      for (const auto& call : *calls) {
        if (!call.is_object()) continue;
        auto* f = obj(call.get_object(), "function");
        boost::system::error_code bad;
        auto input = json::parse(f ? str(*f, "arguments") : std::string_view("{}"), bad);
        content.push_back(json::object{{"type", "tool_use"},
                                       {"id", str(call.get_object(), "id")},
                                       {"name", f ? str(*f, "name") : ""},
                                       {"input", bad ? json::value(json::object()) : input}});
      }
  }
  auto model = str(c, "model");
  json::object answer{{"id", "msg_" + std::string(str(c, "id"))},
                      {"type", "message"},
                      {"role", "assistant"},
                      {"model", model.empty() ? std::string_view(model_) : model},
                      {"content", std::move(content)},
                      {"stop_reason", stop_reason_for(str(*choice0, "finish_reason"))},
                      {"stop_sequence", nullptr},
                      {"usage",
                       {{"input_tokens", prompt_ - cached_},
                        {"cache_read_input_tokens", cached_},
                        {"output_tokens", output_}}}};
  body = json::serialize(answer);
}

}  // namespace tokengate::translate
