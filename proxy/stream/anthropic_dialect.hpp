#pragma once
// Anthropic's Messages stream (and the engines that serve /v1/messages):
// message_start (input tokens), content_block_start / _delta / _stop
// (text, thinking, tool use and its arguments), message_delta (the stop
// reason, cumulative output tokens), message_stop. anthropic_reading
// reads a content delta the lean way when it can vouch for it, anything
// else in full from the parsed document; the two give the same facts.
#include <string_view>

#include "stream/observation.hpp"

namespace tokengate::stream {

// The lean reader: the shape that carries almost every token, a text,
// thinking or tool-argument delta, exactly as the API writes it (no blanks
// but those it pads some events with before the last brace),
//   {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"…"}}
// (or "thinking_delta","thinking" / "input_json_delta","partial_json").
// True when `data` is certainly that, with `kinds` what the full parse
// would find (kind_text, kind_reasoning or kind_tool_call when the string
// is not empty, else none); false means "parse it the general way". A full parse of each such
// event was three quarters of the proxy's instructions on an Anthropic
// stream (callgrind, 256 tokens: 1.5 million instructions a request
// against 0.32 million for an OpenAI one).
bool read_anthropic_delta(std::string_view data, unsigned& kinds);

// The Anthropic dialect's reading of one event (not an error).
class anthropic_reading {
 public:
  bool read_lean(std::string_view data, observation& o) {
    unsigned kinds = 0;
    if (!read_anthropic_delta(data, kinds)) return false;
    o.add_kinds(kinds);
    return true;
  }
  void read_full(const boost::json::value& event, observation& o);
};

}  // namespace tokengate::stream
