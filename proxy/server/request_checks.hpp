#pragma once
// The request's first phase: what can be refused from its head alone,
// before any policy is read. A target that is not a path (an absolute-form
// target would let a client pick the upstream), and a method the path does
// not serve.
#include <optional>

#include "http/client_request.hpp"
#include "http/request_context.hpp"
#include "http/request_error.hpp"

namespace tokengate {

std::optional<request_error> refuse_target_or_method(const client_request& request,
                                                     const request_context& ctx);

// GET /v1/models: answered by the proxy from its policy, never forwarded.
bool is_models_list(const client_request& request, const request_context& ctx);

}  // namespace tokengate
