#include "stream/anthropic_dialect.hpp"

#include "stream/json_fields.hpp"
#include "stream/json_pieces.hpp"

namespace tokengate::stream {

bool read_anthropic_delta(std::string_view data, unsigned& kinds) {
  constexpr std::string_view head = R"({"type":"content_block_delta","index":)";
  constexpr std::string_view text_delta = R"(,"delta":{"type":"text_delta","text":")";
  constexpr std::string_view thinking_delta = R"(,"delta":{"type":"thinking_delta","thinking":")";
  // A tool call's arguments, streamed as fragments of JSON text (agents'
  // streams are mostly these): their content is not looked at.
  constexpr std::string_view input_json_delta =
      R"(,"delta":{"type":"input_json_delta","partial_json":")";
  constexpr std::string_view tail =
      R"("})";  // the string's quote and the delta's brace; then the event's
  // (The first test is a quick no for the other shapes, whose first member
  // is not `type`: an OpenAI chunk starts with {"id".)
  if (data.size() < head.size() + tail.size() + 1 || data[2] != head[2] || data.back() != '}')
    return false;
  // Blanks before the event's brace, as Anthropic pads thinking deltas
  // (JSON allows them there), are stepped over.
  auto inner = data.substr(0, data.size() - 1);
  while (inner.size() > head.size() && is_json_blank(inner.back())) inner.remove_suffix(1);
  if (inner.size() < head.size() + tail.size() || !inner.starts_with(head) ||
      !inner.ends_with(tail))
    return false;
  // The index: a plain integer, as the full parser reads one (nothing here
  // depends on its value).
  auto rest = data.substr(head.size(), inner.size() - head.size() - tail.size());
  auto digits = plain_integer_length(rest.data(), rest.data() + rest.size());
  if (digits == 0) return false;
  rest.remove_prefix(digits);
  unsigned kind;
  if (rest.starts_with(text_delta)) {
    rest.remove_prefix(text_delta.size());
    kind = kind_text;
  } else if (rest.starts_with(thinking_delta)) {
    rest.remove_prefix(thinking_delta.size());
    kind = kind_reasoning;
  } else if (rest.starts_with(input_json_delta)) {
    rest.remove_prefix(input_json_delta.size());
    kind = kind_tool_call;
  } else {
    return false;
  }
  // The string runs exactly to the tail (which begins with its closing quote).
  bool escaped = false;
  const char* end = rest.data() + rest.size();
  if (string_end(rest.data(), end, escaped) != end) return false;
  kinds = rest.empty() ? 0 : kind;  // (an escape decodes to at least one character)
  return true;
}

namespace {

// An Anthropic usage object's input: what it says, plus the cache reads
// and writes it (or an earlier event) reported, which it leaves out.
void read_input(const json_fields::json::object* usage, observation& o) {
  using namespace json_fields;
  o.cache_tokens(integer(usage, "cache_read_input_tokens"),
                 integer(usage, "cache_creation_input_tokens"));
  if (auto in = integer(usage, "input_tokens"))
    o.input_tokens(*in + o.facts().cache_read_tokens.value_or(0) +
                   o.facts().cache_write_tokens.value_or(0));
}

void read_block_start(const json_fields::json::object& e, observation& o) {
  using namespace json_fields;
  auto* block = obj(e, "content_block");
  if (!block) return;
  auto type = str(*block, "type");
  if (type == "tool_use" || type == "server_tool_use")
    o.open_tool_call(observation::tool_key(0, integer(&e, "index").value_or(0)),
                     str(*block, "name"));
  else if (type == "text")
    o.text(0, str(*block, "text"));
  else if (type == "thinking")
    o.reasoning(str(*block, "thinking"));
}

void read_block_delta(const json_fields::json::object& e, observation& o) {
  using namespace json_fields;
  auto* delta = obj(e, "delta");
  if (!delta) return;
  auto type = str(*delta, "type");
  if (type == "text_delta")
    o.text(0, str(*delta, "text"));
  else if (type == "thinking_delta")
    o.reasoning(str(*delta, "thinking"));
  else if (type == "input_json_delta")
    o.tool_arguments(observation::tool_key(0, integer(&e, "index").value_or(0)),
                     str(*delta, "partial_json"));
}

}  // namespace

void anthropic_reading::read_full(const boost::json::value& event, observation& o) {
  using namespace json_fields;
  const auto& e = event.get_object();
  auto type = str(e, "type");
  if (type == "message_start") {
    auto* message = obj(e, "message");
    auto* usage = message ? obj(*message, "usage") : nullptr;
    if (!usage) return;
    o.usage_seen();
    // Its output_tokens is a placeholder; the real count comes in message_delta.
    read_input(usage, o);
  } else if (type == "content_block_start") {
    read_block_start(e, o);
  } else if (type == "content_block_delta") {
    read_block_delta(e, o);
  } else if (type == "message_delta") {
    if (auto* delta = obj(e, "delta")) o.finish(0, str(*delta, "stop_reason"));
    if (auto* usage = obj(e, "usage")) {
      o.usage_seen();
      // Cumulative: replace, never add.
      if (auto out = integer(usage, "output_tokens")) o.output_tokens(*out);
      read_input(usage, o);
    }
  } else if (type == "message_stop") {
    o.done("event: message_stop");
  }
}

}  // namespace tokengate::stream
