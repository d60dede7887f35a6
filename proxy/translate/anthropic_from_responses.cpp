#include "translate/anthropic_from_responses.hpp"

#include "stream/json_fields.hpp"
#include "translate/chat_from_responses.hpp"
#include "translate/errors.hpp"
#include "translate/event_json.hpp"

namespace tokengate::translate {
namespace {

namespace json = boost::json;
using stream::json_fields::integer;
using stream::json_fields::obj;
using stream::json_fields::str;

}  // namespace

void anthropic_from_responses::on_event(const stream::sse_event& event, std::string& out) {
  if (stopped_) return;
  read_event_json(event.data, [&](const json::object* e) {
    if (!e) return;  // (nothing to translate; the accounting has noted it)
    auto type = str(*e, "type");
    this->event(type.empty() ? event.type : type, *e, out);
  });
}

void anthropic_from_responses::event(std::string_view type, const json::object& e,
                                     std::string& out) {
  if (type == "response.output_text.delta") {
    text(block::text, str(e, "delta"), out);
  } else if (type == "response.reasoning_summary_text.delta" ||
             type == "response.reasoning_text.delta") {
    text(block::thinking, str(e, "delta"), out);
  } else if (type == "response.function_call_arguments.delta") {
    arguments(integer(&e, "output_index").value_or(-1), str(e, "delta"), out);
  } else if (type == "response.output_item.added") {
    call_added(e, out);
  } else if (type == "response.output_item.done") {
    call_done(e, out);
  } else if (type == "response.created" || type == "response.in_progress") {
    if (!started_) open_message(obj(e, "response"), out);
  } else if (type == "response.completed") {
    finish(obj(e, "response"), calls_.empty() ? "end_turn" : "tool_use", out);
  } else if (type == "response.incomplete") {
    auto* response = obj(e, "response");
    auto* details = response ? obj(*response, "incomplete_details") : nullptr;
    bool filtered = details && str(*details, "reason") == "content_filter";
    finish(response, filtered ? "refusal" : "max_tokens", out);
  } else if (type == "response.failed") {
    auto* response = obj(e, "response");
    failed(response ? obj(*response, "error") : nullptr, out);
  } else if (type == "error") {
    failed(&e, out);
  }
  // content parts, the other .done events, refusal deltas: no counterpart
}

void anthropic_from_responses::open_message(const json::object* response, std::string& out) {
  json::object c;  // (what start_message reads of a chat chunk: its id and model)
  if (response) {
    if (auto id = str(*response, "id"); !id.empty()) c["id"] = id;
    if (auto model = str(*response, "model"); !model.empty()) c["model"] = model;
  }
  start_message(c, out);
}

void anthropic_from_responses::text(block kind, std::string_view piece, std::string& out) {
  if (piece.empty()) return;
  if (!started_) open_message(nullptr, out);
  if (open_ != kind) open_block(kind, out);
  if (kind == block::text)
    block_delta(open_index_, "text_delta", "text", piece, out);
  else
    block_delta(open_index_, "thinking_delta", "thinking", piece, out);
}

void anthropic_from_responses::call_added(const json::object& e, std::string& out) {
  auto* item = obj(e, "item");
  if (!item || str(*item, "type") != "function_call") return;
  if (!started_) open_message(nullptr, out);
  open_block(block::tool, out, str(*item, "call_id"), str(*item, "name"));
  calls_[integer(&e, "output_index").value_or(-1)] = {open_index_, false};
  arguments(integer(&e, "output_index").value_or(-1), str(*item, "arguments"), out);
}

// A call whose arguments came whole in its item, not in deltas: told here.
void anthropic_from_responses::call_done(const json::object& e, std::string& out) {
  auto* item = obj(e, "item");
  auto found = calls_.find(integer(&e, "output_index").value_or(-1));
  if (!item || found == calls_.end() || found->second.streamed) return;
  arguments(found->first, str(*item, "arguments"), out);
}

void anthropic_from_responses::arguments(std::int64_t output_index, std::string_view fragment,
                                         std::string& out) {
  auto found = calls_.find(output_index);
  if (fragment.empty() || found == calls_.end()) return;
  found->second.streamed = true;
  block_delta(found->second.block, "input_json_delta", "partial_json", fragment, out);
}

void anthropic_from_responses::finish(const json::object* response, std::string_view stop_reason,
                                      std::string& out) {
  if (!started_) open_message(response, out);
  if (auto* usage = response ? obj(*response, "usage") : nullptr) {
    if (auto n = integer(usage, "input_tokens")) prompt_ = *n;
    if (auto n = integer(usage, "output_tokens")) output_ = *n;
    if (auto* details = obj(*usage, "input_tokens_details"))
      if (auto n = integer(details, "cached_tokens")) cached_ = *n;
  }
  stop_reason_ = stop_reason;
  stop(out);
}

void anthropic_from_responses::failed(const json::object* error, std::string& out) {
  stopped_ = true;
  auto code = error ? str(*error, "code") : std::string_view();
  auto message = error ? str(*error, "message") : std::string_view();
  out.append(anthropic_error_event(code.empty() ? "server_error" : code, code,
                                   message.empty() ? "upstream error" : message));
}

void anthropic_from_responses::on_end(std::string& out) {
  // A Responses stream ends with its terminal event: one that stops
  // before it was broken, and is not told as a finished message.
  if (!started_ || stopped_) return;
  stopped_ = true;
  out.append(anthropic_error_event("api_error", "",
                                   "upstream ended its stream without finishing the message"));
}

void anthropic_from_responses::whole(unsigned& status, std::string& body) {
  chat_from_responses(true).whole(status, body);
  anthropic_from_chat::whole(status, body);
}

}  // namespace tokengate::translate
