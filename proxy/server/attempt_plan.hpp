#pragma once
// The attempts phase: the exchange's plan, one attempt per ordered target,
// each with the body it receives (the policy's edits, or the request
// translated for a target that speaks the other API), the route's limit,
// retry and resume rules, and the early connection when the first target
// holds it. A request that cannot be translated is refused here.
#include <memory>
#include <string_view>
#include <variant>

#include "config/config.hpp"
#include "http/request_context.hpp"
#include "http/request_error.hpp"
#include "routing/policy.hpp"
#include "server/target_order.hpp"
#include "upstream/exchange.hpp"

namespace tokengate {

struct early_forward;

std::variant<upstream::exchange_plan, request_error> plan_attempts(
    std::shared_ptr<const config::config> cfg, const ordered_targets& targets,
    const routing::routed_request& routed, std::string_view body, const request_context& ctx,
    early_forward* early);

}  // namespace tokengate
