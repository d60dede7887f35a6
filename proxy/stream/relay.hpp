#pragma once
// The relay: an upstream's answer passed to the client chunk by chunk as it
// arrives, never buffered. Each event stream is observed on its way
// (time to first token, every gap between tokens, usage, the output
// limit), whole events at a time, and ends well whatever happens: cut at
// the limit with a proper end in its dialect, an error event when the
// upstream fails mid-stream, a plain close when nothing honest is left.
#include "config/config.hpp"
#include "io/net.hpp"
#include "metrics/counters.hpp"
#include "metrics/latency.hpp"
#include "metrics/realtime_estimate.hpp"
#include "stream/answer_translator.hpp"
#include "upstream/exchange.hpp"

namespace tokengate::stream {

// What the worker lends each relay.
struct relay_env {
  const config::limit_settings& limits;
  metrics::shard& metrics;
  metrics::latency_shard& latency;
  metrics::realtime_estimate& realtime;
};

// Relays the answer whose head has been read (upstream::open_answer), on
// the exchange's upstream connection. Returns whether the client
// connection may carry another request.
// `translator`: the answer is in the other API than the client's
// (stream/answer_translator.hpp); null for the client's own.
// `resumed`: the client's stream this answer continues (its head sent,
// its body chunked); null for a new one. The continuing relay writes no
// head, holds the new answer's events back until their text has covered
// what the client has exactly, and passes on the rest. A stream that
// fails after content, where the plan allows a resume, is left suspended
// (s.suspended) instead of ended: the caller continues it.
net::awaitable<bool> relay_response(upstream::exchange_state& s, upstream::answer& answer,
                                    const upstream::exchange_plan& plan, const relay_env& env,
                                    bool client_keep_alive, unsigned client_http_version,
                                    answer_translator* translator,
                                    const upstream::suspended_stream* resumed = nullptr);

}  // namespace tokengate::stream
