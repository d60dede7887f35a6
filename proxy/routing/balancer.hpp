#pragma once
// Which target to try first and in what order to fall back, from weights
// and passive health (upstream/health.hpp).
#include <random>
#include <vector>

#include "config/config.hpp"
#include "upstream/health.hpp"

namespace tokengate::routing {

// First a target drawn by weight among the healthy ones, then the others in
// the route's listed order (healthy before ejected). If every target is
// ejected they are still all tried: better a likely failure than a certain one.
std::vector<const config::route_target*> attempt_order(const config::route& route,
                                                       const upstream::health_table& health,
                                                       std::mt19937_64& rng);

}  // namespace tokengate::routing
