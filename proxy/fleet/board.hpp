#pragma once
// The fleet as this instance sees it, shared by every worker: each
// upstream's load (upstream_load.hpp) and the admission queue in front of
// the upstreams whose capacity is declared.
//
// A request takes a slot on one upstream for its whole length. On an
// upstream with capacity.max_streams the slot must be free; when none of
// a request's healthy targets has one, the request waits in its route's
// queue (route::queue), highest priority first, FIFO within a priority.
// A slot given back goes straight to the best waiter that can use it, so
// a newcomer never overtakes the queue. A conversation whose replica is
// full may wait for that replica alone for a while first (home_hold,
// affinity.hold): its history is cached there. Without a queue, or when it is
// full, or when the wait passes `timeout`, the request is refused with a
// Retry-After worked out from how fast slots have been coming free.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <variant>
#include <vector>

#include "config/config.hpp"
#include "fleet/upstream_load.hpp"
#include "http/request_context.hpp"
#include "io/net.hpp"

namespace tokengate::metrics {
class prometheus_text;
}

namespace tokengate::fleet {

class board;
class index_sharing;

// A request's place on one upstream: its stream and its tokens counted
// there while it lives, its prompt's prefill (and the blocks it brings to
// the replica's prefix index, pending) until its first token; given back
// (to the next waiters, if any) when each ends.
class slot final : public first_token_hook {
 public:
  slot() = default;
  slot(board* b, upstream_load* load, long long tokens, long long prefill, bool bounded)
      : board_(b), load_(load), tokens_(tokens), prefill_(prefill), bounded_(bounded) {}
  slot(slot&& o) noexcept { *this = std::move(o); }
  slot(const slot&) = delete;
  slot& operator=(const slot&) = delete;
  slot& operator=(slot&& o) noexcept;
  ~slot() { give_back(); }
  upstream_load* load() const { return load_; }
  void first_token() noexcept override;  // its prefill is over
  void give_back();

 private:
  board* board_ = nullptr;
  upstream_load* load_ = nullptr;
  long long tokens_ = 0;
  long long prefill_ = 0;
  bool bounded_ = false;
  std::vector<std::uint64_t> pending_;  // blocks it brought to the index, until its first token
  friend class board;
  class index_sharing;
};

struct candidate {
  upstream_load* load = nullptr;
  int max_streams = 0;  // 0 = no bound
  bool healthy = true;
  long long max_prefill_tokens = 0;  // 0 = no bound
  long long prefill_tokens = 0;      // what this request would prefill there
  long long prefill_ahead = 0;       // … behind this much already in prefill
  // balance: fastest: a block of the prompt another request's prefill is
  // still bringing there: room only once it has (0: none).
  std::uint64_t waits_for_block = 0;
  // Whether it may have to wait for room there.
  bool bounded() const { return max_streams > 0 || max_prefill_tokens > 0; }
  // balance: fastest: the prompt tokens its cache is predicted to hold and
  // not, the requests ahead of this one for a slot, and the predicted TTFT.
  long long matched_tokens = 0, uncached_tokens = 0;
  int ahead = 0;
  double predicted_s = 0;
};

struct admission_request {
  std::string route;
  std::vector<candidate> candidates;  // in the order the picker chose
  long long tokens = 0;               // prompt estimate + output limit
  int priority = 1;                   // 0 high … 2 low
  std::optional<config::queue_settings> queue;
  // The first candidate is the conversation's replica: while it is full,
  // wait this long for a slot there before taking one elsewhere.
  std::chrono::milliseconds home_hold{0};
  // balance: fastest: the prompt's blocks (fleet/prefix_index.hpp), for
  // the index of the replica that takes it.
  std::shared_ptr<const std::vector<std::uint64_t>> blocks;
};

struct admitted {
  slot held;
  std::size_t index = 0;  // which candidate
  std::chrono::microseconds waited{0};
};

class board {
 public:
  board();
  ~board();
  // The shared state of the named upstream (made on first use, kept for
  // the process's life: a reload may bring the name back).
  upstream_load& load_of(const std::string& upstream);

  // A slot on the first candidate (healthy ones first) that has one free,
  // else a place in the queue, else a refusal: 503 engine_overloaded, 429
  // queue_full or 503 queue_timeout, with a Retry-After.
  net::awaitable<std::variant<admitted, request_error>> admit(admission_request request);

  // Every prompt a slot brings to an index is published there too (set
  // before any request).
  void share_with(index_sharing* sharing) { sharing_ = sharing; }

  // Whether each route has a target passing its active health check.
  bool every_route_served(const config::config& cfg);

  // A pick made by the conversation's key (or that would have been, had
  // its target not been overloaded): counted for /metrics.
  void note_pick(const std::string& route, bool by_affinity, bool spilled);
  // balance: fastest: a prediction of a time to first token, and the time
  // it took (tokengate_fleet_ttft_prediction_error, |predicted − actual| ÷
  // actual).
  void note_prediction_error(double predicted_s, double actual_s);

  // tokengate_upstream_*, tokengate_admission_* and tokengate_affinity_*.
  std::string prometheus() const;
  // /stats' "replicas": what balance: fastest has learned of each replica
  // (a JSON object by upstream name; empty without such a route).
  std::string replicas_json() const;
  // /stats' "upstreams" as far as the board knows them (a JSON object by
  // the name of each upstream used or checked since start): the health
  // check's verdict, this instance's streams there and requests queued
  // for it, the engine's own running and waiting (null while unknown), and
  // the share of prompt tokens it reported cached (null where none were).
  std::string upstreams_json() const;

 private:
  friend class slot;
  struct waiter;
  struct route_counters;

  // A slot on the first candidate with room, unless a waiter ahead of
  // `self` (a newcomer when null) could use it.
  std::optional<admitted> claim(const admission_request& r, bool home_only,
                                const waiter* self = nullptr);
  std::pair<std::shared_ptr<waiter>, std::size_t> first_waiter_for(const upstream_load& load) const;
  slot take(const admission_request& r, const candidate& c);
  void give_back(upstream_load& load, long long tokens, long long prefill, bool offer_room);
  void prefill_done(upstream_load& load, long long prefill, bool offer_room);
  void offer(upstream_load& load);  // its room to the waiters, in order (under queue_lock_)
  int retry_after(std::size_t queued) const;
  route_counters& counters_of(const std::string& route);
  net::awaitable<std::variant<admitted, request_error>> wait_in_queue(
      admission_request r, std::chrono::steady_clock::time_point since);

  index_sharing* sharing_ = nullptr;
  mutable std::shared_mutex loads_lock_;
  std::map<std::string, std::unique_ptr<upstream_load>> loads_;

  mutable std::mutex queue_lock_;  // the waiters, claims and give-backs of bounded slots
  std::deque<std::shared_ptr<waiter>> waiters_;
  std::uint64_t arrivals_ = 0;
  std::deque<std::chrono::steady_clock::time_point> recent_frees_;  // the drain rate
  std::map<std::string, std::unique_ptr<route_counters>> routes_;

  static constexpr std::array<double, 7> error_bounds{0.05, 0.1, 0.25, 0.5, 1, 2, 5};
  std::array<std::atomic<std::uint64_t>, error_bounds.size() + 1> error_buckets_{};
  std::atomic<std::uint64_t> error_count_{0}, error_sum_millis_{0};
  void prediction_prometheus(metrics::prometheus_text& out) const;  // (under loads_lock_)
  void upstream_prometheus(metrics::prometheus_text& out) const;
  void admission_prometheus(metrics::prometheus_text& out) const;  // (under queue_lock_)
};

}  // namespace tokengate::fleet
