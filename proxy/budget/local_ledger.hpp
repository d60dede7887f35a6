#pragma once
// Budgets counted in this process, shared by its workers (one lock, held
// for a few map lookups per request). Used without `redis:`, and with
// `on_store_failure: allow_local` while Redis does not answer.
//
// While Redis does not answer, a window counter carries on from the count
// Redis last reported to this process (its own leases included, since
// Redis counts a lease as used when it grants it), not from zero; the
// process may then take an equal share, 1/replicas, of what was left of the
// limit. What it admits meanwhile is kept, settled with the real usage, and
// added to Redis when Redis answers again (carry_over), so the rest of the
// window is charged for it. Concurrency limits are divided by replicas.
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "budget/ledger.hpp"

namespace tokengate::budget {

class local_ledger {
 public:
  // Reserves every counter of `d` or none.
  reservation reserve(const demand& d, std::int64_t now_ms);
  // The same while the shared store does not answer: each window counter
  // from the store's last count, within its share of what was left
  // (`replicas` instances share it); the reservation is to be carried.
  reservation reserve_while_store_down(const demand& d, std::int64_t now_ms, int replicas);
  // The real usage in place of the estimate; the concurrency slots back.
  void settle(const demand& d, const reservation& r, const usage& real);
  // The whole reservation back (nothing was used, the request not counted).
  void give_back(const demand& d, const reservation& r);
  // Each counter of `d` as it stands (nothing reserved): this process's
  // count, or the store's last one where that is higher.
  std::vector<counter_state> peek(const demand& d, std::int64_t now_ms);

  // A reply of the store's: each window counter's count there.
  void saw_in_store(const demand& d, const reservation& r, std::int64_t now_ms);

  // What was counted here while the store was down, for windows still
  // open, to be added to the store: taken (and forgotten) at once; what
  // the store did not take is put back.
  struct carried {
    std::string key;  // scope:kind:window start, the store's key without its prefix
    long long delta = 0;
    std::int64_t window_end_ms = 0;
  };
  bool has_carry_over() const { return carry_pending_.load(std::memory_order_relaxed); }
  std::vector<carried> take_carry_over(std::int64_t now_ms);
  void put_back(const std::vector<carried>& not_taken);

 private:
  struct amount {
    long long value = 0;
    std::int64_t expires_ms = 0;
  };
  reservation reserve_locked(const demand& d, std::int64_t now_ms, int replicas, bool to_carry);
  counter_state state_of(const counter& c, std::int64_t now_ms, std::string& key);
  long long limit_of(const counter& c, const std::string& key, int replicas) const;
  void apply(const demand& d, const reservation& r, const std::vector<long long>& deltas);
  void carry(const std::string& key, long long delta, std::int64_t window_end_ms);
  void forget_expired(std::int64_t now_ms);

  std::mutex mutex_;
  std::unordered_map<std::string, amount> amounts_;
  // The store's counts as last reported, per window counter.
  std::unordered_map<std::string, amount> seen_;
  std::unordered_map<std::string, carried> carry_;
  std::atomic<bool> carry_pending_{false};
  // Per scope: reservation id -> when the slot expires.
  std::unordered_map<std::string, std::map<std::string, std::int64_t>> slots_;
  std::int64_t next_sweep_ms_ = 0;
};

}  // namespace tokengate::budget
