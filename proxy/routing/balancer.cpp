#include "routing/balancer.hpp"

#include <algorithm>

namespace tokengate::routing {

bool health_table::ejected(const std::string& upstream, clock::time_point now) const {
  auto it = upstreams_.find(upstream);
  return it != upstreams_.end() && it->second.ejected_until > now;
}

bool health_table::record_failure(const std::string& upstream, const config::health_settings& settings,
                                  clock::time_point now) {
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

std::vector<const config::route_target*> attempt_order(const config::route& route, const health_table& health,
                                                       std::mt19937_64& rng) {
  auto now = health_table::clock::now();
  // One vector (one allocation per request): the healthy targets in
  // configured order, then the ejected ones; the weighted pick then moves
  // to the front, the rest keeping their order.
  std::vector<const config::route_target*> order;
  order.reserve(route.targets.size());
  for (const auto& t : route.targets)
    if (!health.ejected(t.upstream, now)) order.push_back(&t);
  const auto healthy = static_cast<std::ptrdiff_t>(order.size());
  for (const auto& t : route.targets)
    if (health.ejected(t.upstream, now)) order.push_back(&t);

  std::uint64_t total = 0;
  for (std::ptrdiff_t i = 0; i < healthy; ++i) total += order[i]->weight;
  if (total > 0) {
    auto pick = std::uniform_int_distribution<std::uint64_t>(0, total - 1)(rng);
    for (std::ptrdiff_t i = 0; i < healthy; ++i) {
      if (pick < order[i]->weight) {
        std::rotate(order.begin(), order.begin() + i, order.begin() + i + 1);
        break;
      }
      pick -= order[i]->weight;
    }
  }
  return order;
}

std::chrono::milliseconds backoff_for(int attempt, std::chrono::milliseconds base, std::mt19937_64& rng) {
  if (attempt <= 0 || base.count() == 0) return std::chrono::milliseconds(0);
  double scaled = static_cast<double>(base.count()) * static_cast<double>(1LL << std::min(attempt - 1, 10));
  double jitter = std::uniform_real_distribution<double>(0.5, 1.5)(rng);
  return std::chrono::milliseconds(static_cast<long long>(scaled * jitter));
}

}  // namespace tokengate::routing
