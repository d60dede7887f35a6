#pragma once
// The route phase: the policy's decision on the whole body (the route, the
// key, the model and the output limit), written into the request's context
// for the accounting, with the limit's clamps and refusals counted.
#include <string_view>
#include <variant>

#include "config/config.hpp"
#include "http/request_context.hpp"
#include "http/request_error.hpp"
#include "routing/policy.hpp"

namespace tokengate {

class worker;

std::variant<routing::routed_request, request_error> route_request(worker& w,
                                                                   const config::config& cfg,
                                                                   std::string_view body,
                                                                   std::string_view client_key,
                                                                   request_context& ctx);

}  // namespace tokengate
