#pragma once
// What this instance knows of one upstream's load, shared by every worker
// (atomics; the admission queue's changes happen under its lock): its own
// requests in flight there, what the active health check last concluded,
// and what the engine itself last reported on its metrics page.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "fleet/prefix_index.hpp"
#include "fleet/ttft_model.hpp"

namespace tokengate::fleet {

struct upstream_load {
  explicit upstream_load(std::string n) : name(std::move(n)) {}
  const std::string name;

  std::atomic<int> streams{0};           // this instance's requests on it, streamed or not
  std::atomic<long long> tokens{0};      // their prompt estimates plus output limits
  std::atomic<long long> prefilling{0};  // … their prompt tokens whose first token is not back
  // Since the replica last had none in prefill: when, and the prompt
  // tokens sent it since (what it has worked through since then).
  std::atomic<std::int64_t> prefill_busy_since_ns{0};
  std::atomic<long long> prefill_sent_since_busy{0};
  std::atomic<bool> probed_healthy{true};  // the active check's verdict (true until one fails)
  std::atomic<std::int64_t> health_changed_unix_ms{0};  // … when it last changed; 0: never
  // The engine's own gauges (engine_metrics): -1 while unknown.
  std::atomic<int> engine_running{-1};
  std::atomic<int> engine_waiting{-1};
  std::atomic<long long> engine_kv_tokens{
      0};                                  // its KV cache's size as it publishes it; 0 = unknown
  std::atomic<std::uint64_t> finished{0};  // requests that ended here
  // balance: fastest. The prompt blocks sent there, and its learned time
  // to first token (each with its own lock).
  prefix_index index;
  ttft_model ttft;
  std::atomic<int> max_streams{0};  // as last declared (capacity.max_streams)
  // The prompt tokens predicted cached there, and those the engine then
  // reported cached, over the answers that reported them.
  std::atomic<long long> predicted_cached_tokens{0}, reported_cached_tokens{0};
  // … and those answers' prompt tokens (the engine's prefix cache hit ratio).
  std::atomic<long long> reported_prompt_tokens{0};

  void prefill_sent(long long tokens) {
    if (tokens <= 0) return;
    if (prefilling.fetch_add(tokens, std::memory_order_relaxed) <= 0) {
      prefill_busy_since_ns.store(now_ns(), std::memory_order_relaxed);
      prefill_sent_since_busy.store(tokens, std::memory_order_relaxed);
    } else {
      prefill_sent_since_busy.fetch_add(tokens, std::memory_order_relaxed);
    }
  }
  void prefill_ended(long long tokens) {
    if (tokens <= 0) return;
    if (prefilling.fetch_sub(tokens, std::memory_order_relaxed) <= tokens)
      prefill_sent_since_busy.store(0, std::memory_order_relaxed);
  }
  // What is left of the prefill in flight there: what it was sent since
  // it was last idle, less what it has done since at `tokens_per_second`
  // (never more than is in flight).
  double prefill_left(double tokens_per_second) const {
    const auto in_flight = static_cast<double>(prefilling.load(std::memory_order_relaxed));
    if (in_flight <= 0) return 0;
    const double busy_s =
        static_cast<double>(now_ns() - prefill_busy_since_ns.load(std::memory_order_relaxed)) / 1e9;
    const auto sent = static_cast<double>(prefill_sent_since_busy.load(std::memory_order_relaxed));
    return std::clamp(sent - busy_s * tokens_per_second, 0.0, in_flight);
  }
  static std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // Its index holds as many blocks as its KV cache: as declared
  // (capacity.kv_tokens), else as the engine publishes it, else 2M tokens.
  void size_index(long long declared_kv_tokens) {
    constexpr long long default_kv_tokens = 2'000'000;
    const auto published = engine_kv_tokens.load(std::memory_order_relaxed);
    const auto kv = declared_kv_tokens ? declared_kv_tokens
                    : published > 0    ? published
                                       : default_kv_tokens;
    index.set_capacity(static_cast<std::size_t>(kv / static_cast<long long>(prefix_block_tokens)));
  }

  // The streams the balancer weighs: ours, or the engine's running and
  // waiting when it reports more (other proxies, other clients share it).
  int busy() const {
    const int own = streams.load(std::memory_order_relaxed);
    const int running = engine_running.load(std::memory_order_relaxed);
    const int waiting = engine_waiting.load(std::memory_order_relaxed);
    if (running < 0) return own;
    return std::max(own, running + std::max(waiting, 0));
  }
};

}  // namespace tokengate::fleet
