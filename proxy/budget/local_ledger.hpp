#pragma once
// Budgets counted in this process, shared by its workers (one lock, held
// for a few map lookups per request). Used without `redis:`, and with
// `on_store_failure: allow_local` while Redis does not answer, when every
// limit is divided by the declared replica count.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "budget/ledger.hpp"

namespace tokengate::budget {

class local_ledger {
 public:
  // Reserves every counter of `d` or none; limits are divided by `divisor`
  // (at least 1 each).
  reservation reserve(const demand& d, std::int64_t now_ms, int divisor = 1);
  // The real usage in place of the estimate; the concurrency slots back.
  void settle(const demand& d, const reservation& r, const usage& real);
  // Each counter of `d` as it stands (nothing reserved).
  std::vector<counter_state> peek(const demand& d, std::int64_t now_ms);

 private:
  struct amount {
    long long value = 0;
    std::int64_t expires_ms = 0;
  };
  counter_state state_of(const counter& c, std::int64_t now_ms, std::string& key);
  void forget_expired(std::int64_t now_ms);

  std::mutex mutex_;
  std::unordered_map<std::string, amount> amounts_;
  // Per scope: reservation id -> when the slot expires.
  std::unordered_map<std::string, std::map<std::string, std::int64_t>> slots_;
  std::int64_t next_sweep_ms_ = 0;
};

}  // namespace tokengate::budget
