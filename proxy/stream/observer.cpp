#include "stream/observer.hpp"

#include <array>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>

#include "stream/json_fields.hpp"

namespace tokengate::stream {
namespace {

namespace json = boost::json;

// Parsing scratch space, reused by every event on this thread: events are
// observed one at a time, so a typical event costs no heap allocation.
thread_local std::array<unsigned char, 16 * 1024> parse_scratch;

using any_reading =
    std::variant<chat_reading, responses_reading, anthropic_reading, native_reading>;

any_reading reading_for(dialect d) {
  switch (d) {
    case dialect::openai_chat:
    case dialect::openai_completions:
      return chat_reading();
    case dialect::openai_responses:
      return responses_reading();
    case dialect::anthropic_messages:
      return anthropic_reading();
    case dialect::other:
      break;
  }
  return native_reading();
}

// OpenAI's SDK treats any truthy "error" member as an error.
bool truthy(const json::value* v) {
  if (!v || v->is_null()) return false;
  if (v->is_bool()) return v->get_bool();
  if (v->is_string()) return !v->get_string().empty();
  if (v->is_object()) return !v->get_object().empty();
  return true;
}

// An error in any dialect: an `error` event or type (Anthropic, llama.cpp's
// older builds), or a truthy `error` member (OpenAI-compatible engines
// mid-stream, Ollama).
bool read_error(std::string_view event_type, const json::value& event, observation& o) {
  const auto& e = event.get_object();
  if (event_type == "error" || json_fields::str(e, "type") == "error") {
    auto* detail = e.if_contains("error");
    o.error(detail ? *detail : event);
    return true;
  }
  if (truthy(e.if_contains("error"))) {
    o.error(e.at("error"));
    return true;
  }
  return false;
}

}  // namespace

stream_observer::stream_observer(dialect d, bool record, bool fast_path)
    : observation_(record), fast_path_(fast_path), reading_(reading_for(d)) {}

void stream_observer::on_event(const sse_event& event) { on_json(event.type, event.data); }

void stream_observer::feed_ndjson(std::string_view bytes) {
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      if (ndjson_line_.size() + bytes.size() <= sse_parser::default_max_event_bytes)
        ndjson_line_.append(bytes);
      return;
    }
    std::string_view line = bytes.substr(0, nl);
    if (!ndjson_line_.empty()) {
      ndjson_line_.append(line);
      line = ndjson_line_;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) on_json("message", line);
    ndjson_line_.clear();
    bytes.remove_prefix(nl + 1);
  }
}

// The lean readings answer for what the full one would find, without
// building a document; recording needs the decoded text, and an error
// event its detail, so those are always read in full. (Inlined into
// on_json: it runs for nearly every event.)
[[gnu::always_inline]] inline bool stream_observer::read_lean(std::string_view event_type,
                                                              std::string_view data) {
  if (!fast_path_ || observation_.recording() || event_type == "error") return false;
  // (The chat dialect first, tested directly: most streams speak it.)
  if (auto* chat = std::get_if<chat_reading>(&reading_)) return chat->read_lean(data, observation_);
  if (auto* anthropic = std::get_if<anthropic_reading>(&reading_))
    return anthropic->read_lean(data, observation_);
  if (auto* responses = std::get_if<responses_reading>(&reading_))
    return responses->read_lean(event_type, data, observation_);
  return false;  // (an engine's own API: always in full)
}

void stream_observer::on_json(std::string_view event_type, std::string_view data) {
  observation_.begin_event();
  if (data == "[DONE]") {
    observation_.done("data: [DONE]");
  } else if (read_lean(event_type, data)) {
    ++fast_path_events_;
  } else {
    read_full(event_type, data);
  }
  observation_.end_event();
}

// Any event, parsed whole: what every dialect shares, then the dialect's
// own reading.
void stream_observer::read_full(std::string_view event_type, std::string_view data) {
  json::monotonic_resource scratch(parse_scratch.data(), parse_scratch.size());
  boost::system::error_code ec;
  json::value parsed = data.empty() ? json::value() : json::parse(data, ec, &scratch);
  if (data.empty() || ec || !parsed.is_object()) {
    observation_.ignored();
    return;
  }
  if (read_error(event_type, parsed, observation_)) return;
  std::visit([&](auto& reading) { reading.read_full(parsed, observation_); }, reading_);
}

}  // namespace tokengate::stream
