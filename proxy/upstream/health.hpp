#pragma once
// Passive health and the pause between attempts. One table per worker
// thread: no locks; each worker learns an upstream's health from its own
// traffic (connect errors, timeouts and 5xx answers eject it for a while).
#include <chrono>
#include <map>
#include <random>
#include <string>

#include "config/config.hpp"

namespace tokengate::upstream {

class health_table {
 public:
  using clock = std::chrono::steady_clock;

  bool ejected(const std::string& upstream, clock::time_point now) const;
  // Consecutive connect errors / 5xx eject an upstream for the cool-down.
  // Returns true when this failure ejected it.
  bool record_failure(const std::string& upstream, const config::health_settings& settings,
                      clock::time_point now);
  void record_success(const std::string& upstream);

 private:
  struct state {
    int consecutive_failures = 0;
    clock::time_point ejected_until{};
  };
  std::map<std::string, state> upstreams_;
};

// Backoff before fallback attempt n (1-based): base · 2^(n-1), jittered ±50 %.
std::chrono::milliseconds backoff_for(int attempt, std::chrono::milliseconds base,
                                      std::mt19937_64& rng);

}  // namespace tokengate::upstream
