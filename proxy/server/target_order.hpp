#pragma once
// The targets phase: the route's targets in the order to try them (the
// fleet's choice, server/fleet_choice.hpp), less those that cannot take
// the client's API, with the target the body was forwarded early to
// first when the whole body's decision agrees with it, and cut to the
// route's retries.
#include <memory>
#include <string_view>
#include <variant>

#include "config/config.hpp"
#include "http/request_context.hpp"
#include "http/request_error.hpp"
#include "routing/policy.hpp"
#include "server/fleet_choice.hpp"

namespace tokengate {

class worker;
struct early_forward;

struct ordered_targets {
  fleet_choice choice;
  bool takes_early = false;  // the first target holds the early connection
};

std::variant<ordered_targets, request_error> order_targets(worker& w, const config::config& cfg,
                                                           const routing::routed_request& routed,
                                                           std::string_view body,
                                                           const request_context& ctx,
                                                           const early_forward* early);

}  // namespace tokengate
