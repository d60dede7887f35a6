#pragma once
// Per-worker counters. Each shard has exactly one writer (its worker thread),
// so an increment is a relaxed load + store: no lock, no atomic RMW on the hot
// path. The admin endpoint merges all shards when scraped.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tokengate::metrics {

class counter {
 public:
  void add(std::uint64_t n = 1) {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void sub(std::uint64_t n = 1) {
    v_.store(v_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  }
  std::uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

// Requests that ended in an error, by the error's side and code
// (http/request_error.hpp). Both come from a fixed set of words, so the
// label sets stay few. Errors are rare next to events: the lock, which the
// scrape shares, is taken per error, never per event.
class error_counts {
 public:
  void add(std::string_view side, std::string_view code);
  // Calls visit(side, code, count) for each pair seen, in order.
  template <typename Visit>
  void each(Visit&& visit) const {
    std::lock_guard lock(mutex_);
    for (const auto& [key, n] : counts_) visit(key.first, key.second, n);
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::uint64_t, std::less<>> counts_;
};

// Counts by a few labels (names from the config, a fixed set of words):
// same-target retries by route, upstream and reason; stream resumes by
// route, mode, reason and result. Per retry or resume, never per event.
template <std::size_t N>
class label_counts {
 public:
  using key = std::array<std::string, N>;
  void add(key k) {
    std::lock_guard lock(mutex_);
    ++counts_[std::move(k)];
  }
  template <typename Visit>
  void each(Visit&& visit) const {
    std::lock_guard lock(mutex_);
    for (const auto& [k, n] : counts_) visit(k, n);
  }

 private:
  mutable std::mutex mutex_;
  std::map<key, std::uint64_t> counts_;
};

struct shard {
  counter downstream_cx_total;
  counter downstream_cx_active;
  counter downstream_cx_refused_per_client;  // over limits.max_connections_per_client: 429
  counter downstream_cx_accept_paused;       // a worker stopped accepting at limits.max_connections
  counter downstream_rq_total;
  counter downstream_rq_2xx, downstream_rq_3xx, downstream_rq_4xx, downstream_rq_5xx;
  counter downstream_rq_client_cancelled;  // client went away before the end
  counter downstream_rq_stream_failed;     // upstream died after the 200 was sent
  counter downstream_rq_active;
  counter downstream_rq_paced;  // set-ups that waited for a later turn (server/setup_pacer.hpp)
  counter upstream_cx_connect_fail;
  counter upstream_rq_timeout;
  counter upstream_cx_reused;
  counter upstream_tls_handshakes,
      upstream_tls_resumed;  // (resumed: a kept session, no certificate)
  counter downstream_tls_handshakes, downstream_tls_resumed;  // (resumed: the client's ticket)
  counter upstream_ejections;           // an upstream taken out of rotation by passive health
  counter upstream_rq_fallback;         // attempts on a further target after a failure
  counter upstream_rq_forwarded_early;  // long bodies sent on while they arrived
                                        // (server/early_forward.hpp)
  counter upstream_rq_early_abandoned;  // … whose whole body then asked for another plan
  counter limit_injected, limit_clamped, limit_rejected, limit_enforced;
  counter stream_events_total;  // SSE events relayed
  counter stream_active;        // event streams being relayed now
  counter upstream_cx_idle;     // keep-alive connections waiting in the pools
  counter downstream_bytes_sent;
  counter request_body_buffers_kept_bytes;  // kept for the next long bodies (server/body_pool.hpp)

  error_counts errors;
  label_counts<3> retries;  // route, upstream, reason (upstream/retry_policy.hpp)
  label_counts<4> resumes;  // route, mode, reason, result (a stream continued mid-answer)

  void count_status(unsigned status);
};

// Prometheus text exposition of the merged shards.
std::string render_prometheus(const std::vector<const shard*>& shards);

}  // namespace tokengate::metrics
