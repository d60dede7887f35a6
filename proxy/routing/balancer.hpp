#pragma once
// Which target to try first and in what order to fall back, from weights
// and passive health. One table per worker thread: no locks; each worker
// learns an upstream's health from its own traffic.
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace tokengate::routing {

class health_table {
 public:
  using clock = std::chrono::steady_clock;

  bool ejected(const std::string& upstream, clock::time_point now) const;
  // Consecutive connect errors / 5xx eject an upstream for the cool-down.
  // Returns true when this failure ejected it.
  bool record_failure(const std::string& upstream, const config::health_settings& settings, clock::time_point now);
  void record_success(const std::string& upstream);

 private:
  struct state {
    int consecutive_failures = 0;
    clock::time_point ejected_until{};
  };
  std::map<std::string, state> upstreams_;
};

// First a target drawn by weight among the healthy ones, then the others in
// the route's listed order (healthy before ejected). If every target is
// ejected they are still all tried: better a likely failure than a certain one.
std::vector<const config::route_target*> attempt_order(const config::route& route, const health_table& health,
                                                       std::mt19937_64& rng);

// Backoff before fallback attempt n (1-based): base · 2^(n-1), jittered ±50 %.
std::chrono::milliseconds backoff_for(int attempt, std::chrono::milliseconds base, std::mt19937_64& rng);

}  // namespace tokengate::routing
