#include "upstream/health.hpp"

#include <algorithm>

namespace tokengate::upstream {

bool health_table::ejected(const std::string& upstream, clock::time_point now) const {
  auto it = upstreams_.find(upstream);
  return it != upstreams_.end() && it->second.ejected_until > now;
}

bool health_table::record_failure(const std::string& upstream,
                                  const config::health_settings& settings, clock::time_point now) {
  auto& s = upstreams_[upstream];
  if (++s.consecutive_failures < settings.eject_after) return false;
  s.consecutive_failures = 0;
  s.ejected_until = now + settings.cooldown;
  return true;
}

void health_table::record_success(const std::string& upstream) {
  auto it = upstreams_.find(upstream);
  if (it != upstreams_.end()) it->second.consecutive_failures = 0;
}

std::chrono::milliseconds backoff_for(int attempt, std::chrono::milliseconds base,
                                      std::mt19937_64& rng) {
  if (attempt <= 0 || base.count() == 0) return std::chrono::milliseconds(0);
  double scaled =
      static_cast<double>(base.count()) * static_cast<double>(1LL << std::min(attempt - 1, 10));
  double jitter = std::uniform_real_distribution<double>(0.5, 1.5)(rng);
  return std::chrono::milliseconds(static_cast<long long>(scaled * jitter));
}

}  // namespace tokengate::upstream
