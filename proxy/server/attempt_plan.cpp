#include "server/attempt_plan.hpp"

#include "server/early_forward.hpp"
#include "translate/translation.hpp"

namespace tokengate {

namespace {

std::optional<request_error> add_attempts(upstream::exchange_plan& plan,
                                          const std::vector<ordered_target>& order,
                                          std::string_view body, const request_context& ctx,
                                          const routing::routed_request& routed) {
  for (const auto& o : order) {
    const auto& u = plan.config->upstreams.at(o.target->upstream);
    auto made = translate::request_for_target(body, ctx.dialect, ctx.path, routed, *o.target, u,
                                              ctx.usage_injected);
    if (auto* e = std::get_if<request_error>(&made)) return std::move(*e);
    auto& request = std::get<translate::target_request>(made);
    plan.upstreams.push_back(&u);
    plan.edits.push_back(std::move(request.edits));
    plan.translations.push_back(std::move(request.translation));
    plan.models.push_back(o.target->model.empty() ? routed.model : o.target->model);
  }
  return std::nullopt;
}

// The route's rules for the exchange, and the header that tells a client
// its limit was clamped.
void add_route_rules(upstream::exchange_plan& plan, const routing::routed_request& routed) {
  plan.usage_asked = routed.client_asked_usage;
  plan.output_limit = routed.output_limit;
  plan.retry_backoff = routed.route->retry_backoff;
  plan.retry = routed.route->retry;
  plan.resume = routed.route->resume;
  if (routed.limit_clamped)
    plan.response_headers.emplace_back("x-tokengate-limit-clamped",
                                       "requested=" + std::to_string(*routed.requested_limit) +
                                           "; applied=" + std::to_string(*routed.output_limit));
}

}  // namespace

std::variant<upstream::exchange_plan, request_error> plan_attempts(
    std::shared_ptr<const config::config> cfg, const ordered_targets& targets,
    const routing::routed_request& routed, std::string_view body, const request_context& ctx,
    early_forward* early) {
  upstream::exchange_plan plan;
  plan.config = std::move(cfg);
  if (auto refused = add_attempts(plan, targets.choice.order, body, ctx, routed))
    return std::move(*refused);
  if (targets.takes_early) plan.first_connection = std::move(early->acquired);
  add_route_rules(plan, routed);
  return plan;
}

}  // namespace tokengate
