#pragma once
// Each budget counter as this process last saw it (from the store, so
// with every instance's usage in it), and the refusals it made: the
// tokengate_budget_* metrics.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "budget/ledger.hpp"

namespace tokengate::budget {

class board {
 public:
  // After a reservation, granted or refused.
  void record(const demand& d, const reservation& r, std::int64_t now_ms);
  // Prometheus text for every counter seen; a window that has ended shows 0 used.
  std::string prometheus(std::int64_t now_ms) const;
  // The requests this process refused by one limit since start.
  std::uint64_t refusals(const std::string& scope, std::string_view kind) const;

 private:
  struct gauge {
    long long limit = 0;
    long long used = 0;
    std::int64_t reset_at_ms = 0;  // 0: a concurrency limit
    std::uint64_t refusals = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, gauge> gauges_;  // (scope, kind)
};

}  // namespace tokengate::budget
