#include "server/request_checks.hpp"

#include "http/dialect.hpp"

namespace tokengate {

bool is_models_list(const client_request& request, const request_context& ctx) {
  return request.head.method == http::verb::get && ctx.path == "/v1/models";
}

std::optional<request_error> refuse_target_or_method(const client_request& request,
                                                     const request_context& ctx) {
  const auto& target = request.head.target;
  if (target.empty() || target.front() != '/')
    return request_error::client(400, "invalid_target", "request target must be a path");
  const bool is_post_api = request.head.method == http::verb::post && is_proxied_post(ctx.path);
  if (is_models_list(request, ctx) || is_post_api) return std::nullopt;
  if (is_proxied_post(ctx.path) || ctx.path == "/v1/models")
    return request_error::client(405, "method_not_allowed",
                                 "method " + ctx.method + " not allowed on " + ctx.path);
  return request_error::client(404, "unknown_url", "unknown path " + ctx.path);
}

}  // namespace tokengate
