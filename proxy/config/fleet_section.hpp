#pragma once
// The parts of the config that fleet/ applies: an upstream's `capacity`,
// `health_check` and `engine_metrics`; a route's `balance`, `affinity` and
// `queue`; a key's `priority`.
#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace tokengate::config {

// `capacity: {max_streams, max_context_tokens}`: each at least 1 when set
// (an engine with no slot cannot hold anything).
upstream_capacity read_capacity(const reader& r);

// `health_check: {path, interval, timeout, unhealthy_after, healthy_after}`.
health_check_settings read_health_check(const reader& r);

// `engine_metrics: {path, interval}`.
engine_metrics_settings read_engine_metrics(const reader& r);

// `balance`, `affinity` and `queue` of one route (`r` is the route's map).
void read_route_fleet(const reader& r, route& rt);

// `priority: high | normal | low`.
int read_priority(const reader& r);

// What holds only for the config as a whole: a route with a queue has a
// target whose capacity is bounded (else nothing would ever wait in it).
void check_fleet(const reader& root, config& c);

}  // namespace tokengate::config
