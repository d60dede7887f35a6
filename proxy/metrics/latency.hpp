#pragma once
// Where the time went, per route, model and upstream: Prometheus histograms
// and counters for each label set, and log-linear histograms per route over
// sliding windows for /stats. One latency_shard per worker thread; the
// worker is its only writer. A lock is taken only when a new label set
// appears (the first request of a route) and by the admin endpoint while it
// reads, never per request or per token.
#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/counters.hpp"
#include "metrics/histogram.hpp"

namespace tokengate::metrics {

enum class outcome { success, client_error, upstream_error, timeout, cancelled, stream_failed };
inline constexpr std::array<const char*, 6> outcome_names{
    "success", "client_error", "upstream_error", "timeout", "cancelled", "stream_failed"};

struct series {
  series(std::string r, std::string m, std::string u)
      : route(std::move(r)), model(std::move(m)), upstream(std::move(u)) {}
  const std::string route, model, upstream;
  fixed_histogram ttft{ttft_bounds};           // request read → first token written to the client
  fixed_histogram upstream_ttft{ttft_bounds};  // request sent → first token event from the upstream
  fixed_histogram upstream_first_byte{ttft_bounds};  // request sent → response head
  fixed_histogram inter_token{inter_token_bounds};   // every gap between token events
  fixed_histogram time_per_output_token{inter_token_bounds};
  fixed_histogram duration{duration_bounds};  // request read → last byte
  // An upstream read's newest bytes, from their arrival in the kernel (the
  // socket's receive timestamp) to their write to the client: the time an
  // event spends in the proxy, waits for its turn included. Plain-TCP
  // upstreams (a TLS read's bytes come through the TLS engine).
  fixed_histogram relay_delay{relay_delay_bounds};
  // A stream resumed mid-answer: its upstream's failure seen to the next
  // content written to the client (by the upstream that resumed it).
  fixed_histogram time_to_resume{ttft_bounds};
  std::array<std::atomic<std::uint64_t>, outcome_names.size()> requests{};
  std::atomic<std::uint64_t> input_tokens{0}, output_tokens{0};
  // Of the input: read from the upstream's prompt cache, written to it.
  std::atomic<std::uint64_t> cache_read_tokens{0}, cache_write_tokens{0};
};

// A route's values over time: since start, and in 30 s slots so that the
// last minute and the last five minutes can be read.
class windowed_histogram {
 public:
  static constexpr int slot_seconds = 30;
  static constexpr int slot_count = 10;
  using clock = std::chrono::steady_clock;

  void record(std::uint64_t micros, clock::time_point now);
  // Adds the slots younger than `window_slots` slots (and the all-time one).
  void read(merged_histogram& last_minute, merged_histogram& last_five, merged_histogram& all,
            clock::time_point now) const;

 private:
  static std::int64_t epoch_of(clock::time_point t);
  struct slot {
    std::atomic<std::int64_t> epoch{-1};
    loglinear_histogram values;
  };
  loglinear_histogram all_;
  std::array<slot, slot_count> slots_;
};

struct route_windows {
  windowed_histogram ttft, inter_token, time_per_output_token, duration, relay_delay;
  // For /stats (the status page shows them per route): answers whose
  // output limit was clamped to the route's ceiling, streams cut at their
  // limit, and the requests that ended in an error or a refusal.
  counter limit_clamped, limit_cut;
  error_counts errors;
};

class latency_shard {
 public:
  series& series_for(std::string_view route, std::string_view model, std::string_view upstream);
  route_windows& windows_for(std::string_view route);

  // For the admin endpoint: visits every label set / route under the lock.
  template <typename Visit>
  void each_series(Visit&& visit) const {
    std::lock_guard lock(insert_mutex_);
    for (const auto& [key, s] : series_) visit(*s);
  }
  template <typename Visit>
  void each_route(Visit&& visit) const {
    std::lock_guard lock(insert_mutex_);
    for (const auto& [name, w] : routes_) visit(name, *w);
  }

 private:
  mutable std::mutex insert_mutex_;
  std::map<std::string, std::unique_ptr<series>, std::less<>> series_;
  std::map<std::string, std::unique_ptr<route_windows>, std::less<>> routes_;
};

// Prometheus text for the label sets of all shards (summed), and the
// /stats JSON's routes (p50 / p95 / p99 / max per route for 1 m, 5 m and
// all time; requests by outcome, tokens, errors by side and code, limit
// actions), as {"routes": {...}}.
std::string render_latency_prometheus(const std::vector<const latency_shard*>& shards);
std::string render_stats_json(const std::vector<const latency_shard*>& shards);

}  // namespace tokengate::metrics
