#include "server/route_phase.hpp"

#include "server/worker.hpp"

namespace tokengate {

std::variant<routing::routed_request, request_error> route_request(worker& w,
                                                                   const config::config& cfg,
                                                                   std::string_view body,
                                                                   std::string_view client_key,
                                                                   request_context& ctx) {
  auto decision = routing::apply_policy(cfg, {ctx.path, body, client_key});
  if (auto* e = std::get_if<request_error>(&decision)) {
    if (e->code == "max_tokens_exceeded") w.metrics().limit_rejected.add();
    return decision;
  }
  const auto& routed = std::get<routing::routed_request>(decision);
  ctx.model = routed.model;
  ctx.route = routed.route->name;
  ctx.model_label = std::string(routed.matched_pattern);
  // Accounting needs usage: ask for it, and hide it from a client that did not.
  ctx.usage_injected = routing::usage_needed(routed, ctx.path);
  ctx.limit_clamped = routed.limit_clamped;
  ctx.limit_injected = routed.limit_injected;
  ctx.output_limit = routed.output_limit;
  if (routed.limit_clamped) w.metrics().limit_clamped.add();
  if (routed.limit_injected) w.metrics().limit_injected.add();
  return decision;
}

}  // namespace tokengate
