#pragma once
// OpenAI's Responses stream: typed events (response.created, ….delta,
// response.output_item.added, response.completed / incomplete / failed
// with the usage). responses_reading reads the deltas that carry the
// tokens the lean way when it can vouch for them (responses_delta_reader,
// below), anything else in full from the parsed document; the two give the
// same facts.
//
// The lean reader: the events that carry the tokens of OpenAI's Responses
// API, as OpenAI writes them
//   {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_…",
//    "output_index":0,"content_index":0,"delta":"Blue","logprobs":[]}
// and as the engines that imitate it do (vLLM in alphabetical order,
// OpenAI itself since 2025 with an "obfuscation" string of random length).
// Each such event took a full parse into a Boost.JSON document: 1.62
// million instructions for a 256-token request against 0.30 million for
// the same answer as chat chunks (tests/bench/instructions.sh, API=responses);
// read this way, 0.43 million (the rest is mostly the few events that
// repeat the whole text at the end, still parsed in full).
//
// Within a stream these events repeat themselves but for a few values (the
// sequence number, the text, the obfuscation, sometimes an index). So the
// reader reads the first one in one careful pass and remembers its bytes
// with a hole at each string or integer value but the `type`; an event
// that repeats those bytes, with a valid value of the same kind in each
// hole, is the same member for member and reads the same, but for whether
// its `delta` string is empty. The second such event shows which values
// vary; the others are compared as bytes from then on. Anything else
// (blanks, nesting, duplicate or escaped keys, an `error` member, numbers
// it does not vouch for) is "not sure", and the observer parses the event
// the slow way. The fuzz target tests/fuzz/sse_fuzz checks that both ways
// agree on every input.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stream/observation.hpp"

namespace tokengate::stream {

class responses_delta_reader {
 public:
  // True when `data` is certainly a text, reasoning, reasoning-summary or
  // function-call-arguments delta, with `kinds` what the full parse would
  // find (kind_text, kind_reasoning or kind_tool_call when its `delta` is
  // not empty, else none); false means "parse it the general way".
  bool read(std::string_view data, unsigned& kinds);
  // Events answered from the remembered bytes (for tests).
  std::size_t remembered_reads() const { return remembered_reads_; }

 private:
  // `values` (may be null): where each hole's value lies in `data`, when it matches.
  bool matches(std::string_view data, unsigned& kinds, std::string_view* values) const;
  bool learn(std::string_view data, unsigned& kinds);
  struct learning;  // learn's pass over the event (responses_dialect.cpp)
  void keep_varying_holes(const std::string_view* values);

  // A value left out of frame_: where in frame_ it sits, where it lay in
  // the event learned, and what it is.
  struct hole {
    std::uint16_t at;
    std::uint16_t learned_at, learned_size;
    bool is_string;  // else a plain integer
    bool is_delta;   // the `delta` string, whose emptiness decides the kinds
  };
  std::string frame_;  // the remembered event's bytes without its holes' values (empty: none)
  std::vector<hole> holes_;
  std::string learned_;  // the event learned, until the next one shows which values vary
  unsigned kind_ = 0;    // what a non-empty delta of the remembered type is
  std::size_t remembered_reads_ = 0;
};

// The Responses dialect's reading of one event (not [DONE], not an error).
class responses_reading {
 public:
  // `event_type`: the event's `event:` line, a quick sign of a delta (the
  // engines name every event twice, there and in its `type`).
  bool read_lean(std::string_view event_type, std::string_view data, observation& o);
  void read_full(const boost::json::value& event, observation& o);

  const responses_delta_reader& lean_reader() const { return deltas_; }

 private:
  responses_delta_reader deltas_;  // remembers this stream's delta shape
};

}  // namespace tokengate::stream
