#include "stream/resume_splice.hpp"

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "stream/error_event.hpp"
#include "stream/final_event.hpp"
#include "stream/integer_after.hpp"

namespace tokengate::stream {
namespace {

namespace json = boost::json;

constexpr std::string_view sequence_key = "\"sequence_number\":";

const json::object* parsed_object(std::string_view data, json::value& holder) {
  boost::system::error_code ec;
  holder = json::parse(data, ec);
  return ec ? nullptr : holder.if_object();
}

std::string string_at(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

const json::object* object_at(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v ? v->if_object() : nullptr;
}

void learn_responses(const sse_event& event, upstream::stream_identity& into) {
  if (auto n = integer_after(event.data, sequence_key)) into.last_sequence = n->value;
  const bool created = event.type == "response.created";
  const bool item = event.type == "response.output_item.added";
  if (!created && !item) return;
  json::value holder;
  auto* o = parsed_object(event.data, holder);
  if (!o) return;
  if (auto* response = created ? object_at(*o, "response") : nullptr; response && into.id.empty())
    into.id = string_at(*response, "id");
  auto* index = o->if_contains("output_index");
  if (auto* added = item ? object_at(*o, "item") : nullptr; added && index && index->is_int64())
    into.item_ids.emplace(index->get_int64(), string_at(*added, "id"));
}

// The whole number after `key` in `text` moved by `delta` (never below 0).
void add_to_number(std::string& text, std::string_view key, std::int64_t delta) {
  if (auto n = integer_after(text, key))
    text.replace(n->begin, n->end - n->begin,
                 std::to_string(std::max<std::int64_t>(0, n->value + delta)));
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty() || from == to) return;
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

}  // namespace

void learn_identity(dialect d, const sse_event& event, upstream::stream_identity& into) {
  if (d == dialect::openai_responses) return learn_responses(event, into);
  if (!into.id.empty() || event.data.empty() || event.data.front() != '{') return;
  if (d == dialect::anthropic_messages && event.type != "message_start") return;
  json::value holder;
  auto* o = parsed_object(event.data, holder);
  if (!o) return;
  if (d == dialect::anthropic_messages) o = object_at(*o, "message");
  if (o) into.id = string_at(*o, "id");
}

resume_splice::resume_splice(dialect d, upstream::stream_identity client, bool usage_injected)
    : dialect_(d),
      client_(std::move(client)),
      next_sequence_(client_.last_sequence.value_or(-1) + 1),
      usage_injected_(usage_injected) {}

void resume_splice::on_event(const sse_event& event, std::string& out) {
  learn_identity(dialect_, event, attempt_);
  // (the usage-only chunk asked for on the client's behalf: not its own)
  if (usage_injected_ && event.data.find("\"choices\":[]") != std::string_view::npos) return;
  if (event.type != "message") out.append("event: ").append(event.type).append("\n");
  out.append("data: ").append(renamed(event.data)).append("\n\n");
}

void resume_splice::on_cut(long long limit, std::string& out) {
  out += make_limit_final_events(dialect_, limit);
}

void resume_splice::on_failure(const request_error& why, std::string& out) {
  out += make_error_event(dialect_, "upstream_error", why.code, why.message);
}

std::string resume_splice::renamed(std::string_view data) {
  std::string text(data);
  if (!attempt_.id.empty() && !client_.id.empty()) replace_all(text, attempt_.id, client_.id);
  for (const auto& [index, id] : attempt_.item_ids)
    if (auto was = client_.item_ids.find(index); was != client_.item_ids.end())
      replace_all(text, id, was->second);
  if (auto n = integer_after(text, sequence_key))
    text.replace(n->begin, n->end - n->begin, std::to_string(next_sequence_++));
  if (prefilled_tokens_ > 0) {  // (the prefill was sent as prompt, and generated before)
    add_to_number(text, "\"completion_tokens\":", prefilled_tokens_);
    add_to_number(text, "\"output_tokens\":", prefilled_tokens_);
    add_to_number(text, "\"prompt_tokens\":", -prefilled_tokens_);
    add_to_number(text, "\"input_tokens\":", -prefilled_tokens_);
  }
  return text;
}

}  // namespace tokengate::stream
