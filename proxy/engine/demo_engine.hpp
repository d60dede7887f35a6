#pragma once
// The built-in demo engine: a simulated LLM that speaks OpenAI's chat,
// completions and Responses APIs and Anthropic's Messages API (or some of
// them: demo_engine_settings::apis, as llama.cpp's server serves chat
// completions alone). Time to
// first token grows with the prompt (prefill), then tokens come at the
// decode rate; with `slots` its requests share one engine's time instead
// (engine/batch_scheduler.hpp), and GET /metrics shows vLLM's gauges. It
// is the quick start's upstream and every integration test's upstream, so
// it also reports what it saw at GET /demo/stats. On /v1/messages it
// caches prompts at their cache_control breakpoints as Anthropic does
// (engine/prompt_cache.hpp).
//
// Per-request knobs, in an optional "demo" object of the request body:
//   ttft_ms, interval_ms   override the simulated timing
//   tokens                 answer length before a natural stop
//   reset_after            send N tokens, then reset the connection (RST)
//   status                 answer with this HTTP status and an error body
//   drip_ms                stream one byte at a time, this many ms apart
//   garbage                answer 200 text/event-stream with bytes that are not SSE
//   ignore_limit           generate `tokens` whatever max_tokens says (an
//                          engine that overruns: the proxy must cut it)
//   provider_head          a stream's head with a hosted provider's two dozen
//                          fields (rate limits, cookies, tracing), not three
//   obfuscation            end each chat chunk with "obfuscation": a string of
//                          varying length, as OpenAI's chunks do
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "config/config.hpp"
#include "io/net.hpp"

namespace tokengate::engine {

struct demo_stats {
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> cancelled{0};  // the client closed before the answer ended
  std::atomic<std::uint64_t> resets{0};
  std::atomic<std::int64_t> active{0};
  std::atomic<std::int64_t> last_cancel_ns{0};   // steady_clock (CLOCK_MONOTONIC) time
  std::atomic<std::uint64_t> bytes_streamed{0};  // event bytes written: shows backpressure
  // Prompt plus planned output of every generation begun: what the engine
  // was asked for (budget tests hold it to the budget).
  std::atomic<std::uint64_t> tokens_asked{0};
};

class demo_engine {
 public:
  explicit demo_engine(config::demo_engine_settings settings);
  ~demo_engine();

  void start();  // binds (throws if it cannot) and runs on a thread of its own
  void stop();
  std::uint16_t port() const { return port_; }
  const demo_stats& stats() const { return *stats_; }

  struct state;  // defined in the .cpp; public so its helpers can name it

 private:
  config::demo_engine_settings settings_;
  net::io_context io_{1};
  std::unique_ptr<tcp::acceptor> acceptor_;
  std::shared_ptr<demo_stats> stats_;
  std::shared_ptr<state> state_;
  std::thread thread_;
  std::uint16_t port_ = 0;
};

}  // namespace tokengate::engine
