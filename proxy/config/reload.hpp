#pragma once
// What a reload can apply and what waits for a restart. The policy (routes,
// upstreams, client keys, health, each listener's upstream) is read per
// request from the newest snapshot. What is set up once at start is not:
// the listeners' sockets and certificates, the worker threads, the limits
// (read by each connection from the start-up config), the admin listener,
// the demo engine, the drain timeout, the heap's mode and the Redis that
// budgets share. (The log level
// is reloaded by `serve` itself, which knows whether --log-level set it.)
#include <string>
#include <vector>

#include "config/config.hpp"

namespace tokengate::config {

// The YAML names of what differs between `running` and `next` but takes
// effect only after a restart ("limits", "workers", ...); empty when a
// reload applies all of `next`.
std::vector<std::string> changes_needing_restart(const config& running, const config& next);

// The listener `bound` (a socket opened at start) as `cfg` configures it:
// the one of the same name, or `bound` itself when `cfg` has none (a
// listener removed from the file serves until the restart).
const listener& as_configured(const config& cfg, const listener& bound);

// Throws config_error when `next` would leave a listener bound at start
// with no upstream to send to: a config without routes in which a bound
// listener's upstream (as_configured) is not defined. Checked before a
// reload takes effect, so that a reload cannot break a running listener.
void check_bound_listeners_keep_an_upstream(const std::vector<listener>& bound, const config& next);

}  // namespace tokengate::config
