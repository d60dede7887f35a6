#include "translate/responses_from_chat.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <ctime>

#include "http/json_error.hpp"
#include "scan/hex.hpp"
#include "stream/json_fields.hpp"
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

json::object output_text_part(std::string_view text) {
  return {{"type", "output_text"},
          {"annotations", json::array()},
          {"logprobs", json::array()},
          {"text", text}};
}

json::object summary_part(std::string_view text) {
  return {{"type", "summary_text"}, {"text", text}};
}

// Why a finish leaves the response incomplete (empty: it does not).
std::string_view incomplete_reason(std::string_view finish_reason) {
  if (finish_reason == "length") return "max_output_tokens";
  if (finish_reason == "content_filter") return "content_filter";
  return {};
}

}  // namespace

responses_from_chat::responses_from_chat(std::string model, std::optional<std::int64_t> created_at,
                                         std::string hex)
    : model_(std::move(model)),
      created_at_(created_at.value_or(static_cast<std::int64_t>(std::time(nullptr)))),
      hex_(hex.empty() ? random_hex_128() : std::move(hex)) {}

void responses_from_chat::on_event(const stream::sse_event& event, std::string& out) {
  if (ended_) return;
  if (event.data == "[DONE]") {
    // [DONE] with no finish: engines send it after an error too.
    if (finish_reason_.empty())
      fail("server_error", "upstream ended its stream without finishing the response", out);
    else
      end(out);
    return;
  }
  read_event_json(event.data, [&](const json::object* c) {
    if (!c) return;  // (nothing to translate; the accounting has noted it)
    auto* e = c->if_contains("error");
    if (!e || e->is_null()) {
      chunk(*c, out);
      return;
    }
    const auto* detail = e->if_object();
    auto code = detail ? str(*detail, "code") : std::string_view();
    if (code.empty() && detail) code = str(*detail, "type");
    auto message = detail           ? str(*detail, "message")
                   : e->is_string() ? std::string_view(e->get_string())
                                    : std::string_view();
    fail(code.empty() ? "server_error" : code, message.empty() ? "upstream error" : message, out);
  });
}

void responses_from_chat::chunk(const json::object& c, std::string& out) {
  if (!started_) start(&c, out);
  read_usage(obj(c, "usage"));
  auto* choices = arr(c, "choices");
  if (!choices) return;
  for (const auto& choice : *choices) {
    if (!choice.is_object()) continue;
    const auto& ch = choice.get_object();
    if (integer(&ch, "index").value_or(0) != 0) continue;  // (one answer: n = 1)
    if (auto* d = obj(ch, "delta")) delta(*d, out);
    if (auto finish = str(ch, "finish_reason"); !finish.empty() && finish_reason_.empty()) {
      finish_reason_ = finish;
      close_all(out);
    }
  }
}

void responses_from_chat::start(const json::object* c, std::string& out) {
  started_ = true;
  if (c)
    if (auto model = str(*c, "model"); !model.empty()) model_ = model;
  auto response = response_json("in_progress");
  response["usage"] = nullptr;
  emit("response.created", {{"response", response}}, out);
  emit("response.in_progress", {{"response", std::move(response)}}, out);
}

void responses_from_chat::delta(const json::object& d, std::string& out) {
  if (auto reasoning = chat_reasoning(d); !reasoning.empty())
    piece(running(item_kind::reasoning, out), reasoning, out);
  if (auto text = str(d, "content"); !text.empty())
    piece(running(item_kind::message, out), text, out);
  if (auto* calls = arr(d, "tool_calls"))
    for (const auto& call : *calls)
      if (call.is_object()) tool_call(call.get_object(), out);
}

void responses_from_chat::tool_call(const json::object& call, std::string& out) {
  auto index = integer(&call, "index").value_or(0);
  auto* function = obj(call, "function");
  auto found = tool_item_.find(index);
  if (found == tool_item_.end()) {
    auto name = function ? str(*function, "name") : std::string_view();
    if (name.empty()) return;                      // (fragments of a call never opened)
    if (running_ >= 0) close_item(running_, out);  // (text after the calls opens a new message)
    std::string call_id(str(call, "id"));
    if (call_id.empty()) call_id = next_id("call_");
    int item = open_item(item_kind::function_call, out, std::move(call_id), std::string(name));
    found = tool_item_.emplace(index, item).first;
  }
  if (auto arguments = function ? str(*function, "arguments") : std::string_view();
      !arguments.empty())
    piece(found->second, arguments, out);
}

void responses_from_chat::read_usage(const json::object* usage) {
  if (!usage) return;
  usage_seen_ = true;
  if (auto n = integer(usage, "prompt_tokens")) prompt_ = *n;
  if (auto n = integer(usage, "completion_tokens")) completion_ = *n;
  if (auto* details = obj(*usage, "prompt_tokens_details"))
    if (auto n = integer(details, "cached_tokens")) cached_ = *n;
  if (auto* details = obj(*usage, "completion_tokens_details"))
    if (auto n = integer(details, "reasoning_tokens")) reasoning_tokens_ = *n;
}

int responses_from_chat::running(item_kind kind, std::string& out) {
  if (running_ >= 0 && items_[running_].kind == kind) return running_;
  if (running_ >= 0) close_item(running_, out);
  running_ = open_item(kind, out);
  return running_;
}

int responses_from_chat::open_item(item_kind kind, std::string& out, std::string call_id,
                                   std::string name) {
  std::string_view prefix = kind == item_kind::message     ? "msg_"
                            : kind == item_kind::reasoning ? "rs_"
                                                           : "fc_";
  items_.push_back({kind, next_id(prefix), {}, std::move(call_id), std::move(name)});
  int index = static_cast<int>(items_.size()) - 1;
  const auto& it = items_.back();
  emit("response.output_item.added", {{"output_index", index}, {"item", item_json(it)}}, out);
  if (kind == item_kind::message)
    emit("response.content_part.added",
         {{"item_id", it.id},
          {"output_index", index},
          {"content_index", 0},
          {"part", output_text_part("")}},
         out);
  else if (kind == item_kind::reasoning)
    emit("response.reasoning_summary_part.added",
         {{"item_id", it.id},
          {"output_index", index},
          {"summary_index", 0},
          {"part", summary_part("")}},
         out);
  return index;
}

// One delta, written without building a document: the events of a stream
// are mostly these.
void responses_from_chat::piece(int index, std::string_view text, std::string& out) {
  auto& it = items_[index];
  it.text.append(text);
  std::string_view type = it.kind == item_kind::message ? "response.output_text.delta"
                          : it.kind == item_kind::reasoning
                              ? "response.reasoning_summary_text.delta"
                              : "response.function_call_arguments.delta";
  open_event(type, out);
  out.append(",\"item_id\":");
  append_json_string(out, it.id);
  out.append(",\"output_index\":");
  append_int(out, index);
  if (it.kind == item_kind::message) out.append(",\"content_index\":0");
  if (it.kind == item_kind::reasoning) out.append(",\"summary_index\":0");
  out.append(",\"delta\":");
  append_json_string(out, text);
  if (it.kind == item_kind::message) out.append(",\"logprobs\":[]");
  out.push_back('}');
  end_event(out);
}

void responses_from_chat::close_item(int index, std::string& out) {
  auto& it = items_[index];
  if (it.status != "in_progress") return;
  it.status = closing_status();
  if (running_ == index) running_ = -1;
  if (it.kind == item_kind::message) {
    emit("response.output_text.done",
         {{"item_id", it.id},
          {"output_index", index},
          {"content_index", 0},
          {"text", it.text},
          {"logprobs", json::array()}},
         out);
    emit("response.content_part.done",
         {{"item_id", it.id},
          {"output_index", index},
          {"content_index", 0},
          {"part", output_text_part(it.text)}},
         out);
  } else if (it.kind == item_kind::reasoning) {
    emit("response.reasoning_summary_text.done",
         {{"item_id", it.id}, {"output_index", index}, {"summary_index", 0}, {"text", it.text}},
         out);
    emit("response.reasoning_summary_part.done",
         {{"item_id", it.id},
          {"output_index", index},
          {"summary_index", 0},
          {"part", summary_part(it.text)}},
         out);
  } else {
    emit("response.function_call_arguments.done",
         {{"item_id", it.id}, {"output_index", index}, {"name", it.name}, {"arguments", it.text}},
         out);
  }
  emit("response.output_item.done", {{"output_index", index}, {"item", item_json(it)}}, out);
}

void responses_from_chat::close_all(std::string& out) {
  for (std::size_t i = 0; i < items_.size(); ++i) close_item(static_cast<int>(i), out);
}

std::string_view responses_from_chat::closing_status() const {
  return cut_ || !incomplete_reason(finish_reason_).empty() ? "incomplete" : "completed";
}

void responses_from_chat::end(std::string& out) {
  if (ended_) return;
  if (!started_) start(nullptr, out);
  close_all(out);
  ended_ = true;
  bool incomplete = closing_status() == "incomplete";
  emit(incomplete ? "response.incomplete" : "response.completed",
       {{"response", response_json(incomplete ? "incomplete" : "completed")}}, out);
}

void responses_from_chat::fail(std::string_view code, std::string_view message, std::string& out) {
  if (ended_) return;
  if (!started_) start(nullptr, out);
  ended_ = true;
  error_ = json::object{{"code", code}, {"message", message}};
  emit("response.failed", {{"response", response_json("failed")}}, out);
}

void responses_from_chat::on_end(std::string& out) {
  if (ended_) return;
  if (finish_reason_.empty())
    fail("server_error", "upstream ended its stream without finishing the response", out);
  else
    end(out);
}

void responses_from_chat::on_cut(long long limit, std::string& out) {
  if (ended_) return;
  cut_ = true;
  completion_ = limit;
  usage_seen_ = true;
  end(out);
}

void responses_from_chat::on_failure(const request_error& why, std::string& out) {
  fail(why.code.empty() ? std::string_view("server_error") : why.code, why.message, out);
}

void responses_from_chat::open_event(std::string_view type, std::string& out) {
  begin_event(out, type);
  out.append("{\"type\":\"").append(type).append("\",\"sequence_number\":");
  append_int(out, sequence_++);
}

void responses_from_chat::emit(std::string_view type, const json::object& fields,
                               std::string& out) {
  open_event(type, out);
  for (const auto& [key, value] : fields) {
    out.push_back(',');
    append_json_string(out, key);
    out.push_back(':');
    out.append(json::serialize(value));
  }
  out.push_back('}');
  end_event(out);
}

json::object responses_from_chat::item_json(const item& it) const {
  const bool open = it.status == "in_progress";
  if (it.kind == item_kind::message) {
    json::array content;
    if (!open) content.push_back(output_text_part(it.text));
    return {{"id", it.id},
            {"type", "message"},
            {"status", it.status},
            {"content", std::move(content)},
            {"role", "assistant"}};
  }
  if (it.kind == item_kind::reasoning) {
    json::array summary;
    if (!open) summary.push_back(summary_part(it.text));
    return {{"id", it.id}, {"type", "reasoning"}, {"summary", std::move(summary)}};
  }
  return {{"id", it.id},           {"type", "function_call"},
          {"status", it.status},   {"arguments", open ? std::string_view() : it.text},
          {"call_id", it.call_id}, {"name", it.name}};
}

json::object responses_from_chat::response_json(std::string_view status) const {
  json::array output;
  for (const auto& it : items_) output.push_back(item_json(it));
  json::value incomplete = nullptr;
  if (status == "incomplete")
    incomplete = json::object{{"reason", cut_ ? std::string_view("max_output_tokens")
                                              : incomplete_reason(finish_reason_)}};
  return {{"id", "resp_" + hex_},
          {"object", "response"},
          {"created_at", created_at_},
          {"status", status},
          {"error", status == "failed" ? error_ : json::value()},
          {"incomplete_details", std::move(incomplete)},
          {"model", model_},
          {"output", std::move(output)},
          {"usage", usage_json()}};
}

json::value responses_from_chat::usage_json() const {
  if (!usage_seen_) return nullptr;
  return json::object{{"input_tokens", prompt_},
                      {"input_tokens_details", {{"cached_tokens", cached_}}},
                      {"output_tokens", completion_},
                      {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens_}}},
                      {"total_tokens", prompt_ + completion_}};
}

std::string responses_from_chat::next_id(std::string_view prefix) {
  return std::string(prefix) + hex_ + "_" + std::to_string(items_.size());
}

// A whole answer's message, as if streamed in one piece of each kind.
void responses_from_chat::whole_message(const json::object& m, std::string& ignored) {
  if (auto reasoning = chat_reasoning(m); !reasoning.empty())
    piece(running(item_kind::reasoning, ignored), reasoning, ignored);
  if (auto text = str(m, "content"); !text.empty())
    piece(running(item_kind::message, ignored), text, ignored);
  auto* calls = arr(m, "tool_calls");
  if (!calls) return;
  for (std::size_t i = 0; i < calls->size(); ++i) {
    auto* call = (*calls)[i].if_object();
    if (!call) continue;
    json::object indexed = *call;  // (a message's calls have no index: their place is it)
    indexed["index"] = static_cast<std::int64_t>(i);
    tool_call(indexed, ignored);
  }
}

void responses_from_chat::whole(unsigned& status, std::string& body) {
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  // An OpenAI-style engine's errors are OpenAI's shape already; one that
  // is not JSON at all is said in that shape, not passed on.
  if (status >= 400) {
    if (ec || !parsed.is_object())
      body = json_error_body("upstream answered " + std::to_string(status), "server_error",
                             "upstream_error");
    return;
  }
  const json::object* choice0 = nullptr;
  if (!ec && parsed.is_object())
    if (auto* choices = arr(parsed.get_object(), "choices"); choices && !choices->empty())
      choice0 = choices->front().if_object();
  if (!choice0) {
    status = 502;
    body = R"({"error":{"message":"upstream sent an answer that is not a chat completion",)"
           R"("type":"server_error","param":null,"code":"upstream_invalid_answer"}})";
    return;
  }
  const auto& c = parsed.get_object();
  if (auto model = str(c, "model"); !model.empty()) model_ = model;
  read_usage(obj(c, "usage"));
  finish_reason_ = str(*choice0, "finish_reason");
  std::string ignored;  // (the events a stream would have had)
  if (auto* m = obj(*choice0, "message")) whole_message(*m, ignored);
  if (items_.empty()) running(item_kind::message, ignored);
  close_all(ignored);
  bool incomplete = closing_status() == "incomplete";
  body = json::serialize(response_json(incomplete ? "incomplete" : "completed"));
}

}  // namespace tokengate::translate
