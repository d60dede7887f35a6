#include "routing/balancer.hpp"

#include <algorithm>

namespace tokengate::routing {

std::vector<const config::route_target*> attempt_order(const config::route& route,
                                                       const upstream::health_table& health,
                                                       std::mt19937_64& rng) {
  auto now = upstream::health_table::clock::now();
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

}  // namespace tokengate::routing
