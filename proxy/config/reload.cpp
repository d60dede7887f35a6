#include "config/reload.hpp"

#include <algorithm>

namespace tokengate::config {
namespace {

// A listener's upstream is policy (as_configured); the rest is its socket.
bool same_socket(const listener& a, const listener& b) {
  return a.name == b.name && a.address == b.address && a.port == b.port && a.tls == b.tls;
}

}  // namespace

std::vector<std::string> changes_needing_restart(const config& running, const config& next) {
  std::vector<std::string> names;
  if (!std::equal(running.listeners.begin(), running.listeners.end(), next.listeners.begin(),
                  next.listeners.end(), same_socket))
    names.push_back("listeners (addresses, ports, certificate files)");
  if (running.workers != next.workers) names.push_back("workers");
  if (running.limits != next.limits) names.push_back("limits");
  if (running.admin != next.admin) names.push_back("admin");
  if (running.demo_engine != next.demo_engine) names.push_back("demo_engine");
  if (running.drain_timeout != next.drain_timeout) names.push_back("drain_timeout");
  if (running.after_burst != next.after_burst) names.push_back("memory.after_burst");
  if (running.redis != next.redis) names.push_back("redis");
  if (running.tracing != next.tracing) names.push_back("tracing");
  return names;
}

const listener& as_configured(const config& cfg, const listener& bound) {
  for (const auto& l : cfg.listeners)
    if (l.name == bound.name) return l;
  return bound;
}

void check_bound_listeners_keep_an_upstream(const std::vector<listener>& bound,
                                            const config& next) {
  if (!next.routes.empty()) return;  // with routes, no request goes by its listener's upstream
  for (const auto& l : bound) {
    const auto& upstream = as_configured(next, l).upstream;
    if (!next.upstreams.count(upstream))
      throw config_error(next.source + ": listener '" + l.name +
                         "' stays bound until a restart and would send to '" + upstream +
                         "', which this config does not define (and it has no routes)");
  }
}

}  // namespace tokengate::config
