#pragma once
// Everything known about one request, filled in by the phases as they pass
// and turned into the access log line (and metrics) at the end.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/dialect.hpp"
#include "http/request_error.hpp"
#include "http/trace_context.hpp"

namespace tokengate {

using clock = std::chrono::steady_clock;

// Something a request holds until its answer's first token, and lets go
// of then (fleet/board.hpp: its share of a replica's prefill budget).
class first_token_hook {
 public:
  virtual void first_token() noexcept = 0;

 protected:
  ~first_token_hook() = default;
};

struct request_context {
  std::string request_id;
  std::string method;
  std::string path;
  tokengate::dialect dialect = tokengate::dialect::other;
  std::string upstream;

  clock::time_point received;      // request head arrived
  clock::time_point request_read;  // body read
  clock::time_point admitted;      // a slot on an upstream (fleet/board.hpp): after any queue wait
  clock::time_point upstream_connected;  // connection ready, TLS included (pooled: when taken)
  clock::time_point request_sent;        // to the upstream (the last attempt)
  clock::time_point upstream_headers;
  clock::time_point first_token;  // first event carrying generated content, as read (upstream TTFT)
  clock::time_point first_token_written;  // … and as written to the client (client TTFT)
  clock::time_point last_token;
  clock::time_point finished;

  unsigned status = 0;  // what the client was sent (0: nothing)
  bool client_gone = false;
  bool upstream_failed_midstream = false;
  bool streamed = false;  // text/event-stream
  std::uint64_t bytes_to_client = 0;
  std::uint64_t sse_events = 0;
  std::uint64_t content_events = 0;
  std::optional<long long> input_tokens, output_tokens;  // from the upstream's usage
  std::string model;                                     // as the client asked for it
  std::string route = "none";                            // metric label: the route's name
  std::string model_label =
      "none";  // metric label: the route's pattern that matched (bounded, unlike `model`)
  bool usage_injected = false;         // we asked for usage: its chunk is not the client's
  unsigned attempts = 0;               // upstream tries (more than one: fallback)
  unsigned resumes = 0;                // a stream continued after its upstream failed mid-answer
  std::uint64_t resumed_at_token = 0;  // … the first time, after this many token events
  std::string_view resume_mode;        // … the last time: "restart" or "prefill"
  // What a resumed stream's failed attempts cost upstream beyond the
  // answer's own usage (the client's usage is one answer's; a budget
  // settles both): each sent the prompt again, and generated this much.
  unsigned failed_attempts = 0;
  std::uint64_t failed_attempts_output = 0;
  // balance: fastest: the chosen replica's predicted time to first token
  // (ms; negative: none), the prompt tokens its cache was predicted to
  // hold, and why it was chosen: "cache", "load" or "only_one_free".
  bool wants_cached_tokens = false;  // … whose answer's cached tokens are read
  // The prompt tokens the engine had cached (read from the usage of every
  // answer: budgets price them apart), and those an Anthropic upstream
  // wrote to its cache (cache_creation_input_tokens). Both are part of
  // input_tokens.
  std::optional<std::int64_t> cached_tokens;
  std::optional<std::int64_t> cache_write_tokens;
  double fleet_predicted_ms = -1;
  long long fleet_matched_tokens = 0;
  std::string_view fleet_reason;
  first_token_hook* on_first_token = nullptr;  // told once, at the first content event
  bool forwarded_early =
      false;  // the body went upstream while it arrived (server/early_forward.hpp)
  bool limit_clamped = false, limit_injected = false, limit_enforced = false;
  std::optional<request_error> error;  // what went wrong, when something did

  // For the trace (trace/): the ids, each upstream attempt, and what the
  // spans say that nothing above keeps.
  trace_context trace;
  std::vector<attempt_span> attempt_spans;
  std::optional<long long> output_limit;  // as enforced
  std::string finish_reason;              // the stream's last, as its dialect spells it
  // On a route with a response cache (cache/): "hit", "miss" or "bypass".
  std::string_view cache;
};

}  // namespace tokengate
