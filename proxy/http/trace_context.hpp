#pragma once
// W3C Trace Context (traceparent, tracestate) for one request: the trace
// it belongs to (the client's, or a new one), the span tokengate opens for
// it, whether it is sampled, and a record of each upstream attempt (a
// child span, whose id the upstream gets as its parent).
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "scan/hex.hpp"

namespace tokengate {

using trace_id = std::array<std::uint8_t, 16>;
using span_id = std::array<std::uint8_t, 8>;

struct trace_context {
  bool active = false;   // tracing is configured: ids are made and passed on
  bool sampled = false;  // this request's spans are exported
  trace_id trace{};
  span_id parent{};  // the client's span (zero: the trace starts here)
  span_id span{};    // tokengate's server span
  std::string tracestate;
};

// One upstream attempt, as its client span tells it.
struct attempt_span {
  span_id id{};
  std::string upstream;        // its name in the config
  std::string server_address;  // the host it was sent to
  std::string model;           // the model name sent
  std::chrono::steady_clock::time_point start, end;
  unsigned status = 0;          // its answer's status; 0: none
  std::string_view error_code;  // why it failed, when it did
  // An attempt that resumed a stream: how, why the one before failed,
  // when, and after how many tokens sent.
  std::string_view resume_mode, resumed_after;
  std::chrono::steady_clock::time_point failed_at;
  std::uint64_t resumed_at_token = 0;
};

// A `traceparent` value (version 00, or a later one read as 00 says):
// nothing when it is malformed or its ids are all zero, as the spec says.
struct parsed_traceparent {
  trace_id trace;
  span_id parent;
  bool sampled;
};
std::optional<parsed_traceparent> parse_traceparent(std::string_view value);

// `00-<trace>-<span>-<flags>`.
std::string format_traceparent(const trace_id& trace, const span_id& span, bool sampled);

// Random, never all zero.
trace_id new_trace_id();
span_id new_span_id();

template <std::size_t N>
std::string to_hex(const std::array<std::uint8_t, N>& id) {
  return to_hex(id.data(), N);  // (scan/hex.hpp)
}

// The request's trace: the client's (its sampled flag decides, as a
// parent-based sampler does) or a new one, sampled with `ratio`.
trace_context begin_trace(std::string_view traceparent, std::string_view tracestate, double ratio);
// The client's tracestate as it may go on (W3C Trace Context): nothing
// past 32 members (the header is invalid then), and within 512 bytes,
// whole members from the first (the list's most recently updated).
std::string bounded_tracestate(std::string_view tracestate);

}  // namespace tokengate
