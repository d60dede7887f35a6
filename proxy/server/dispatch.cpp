#include "server/dispatch.hpp"

#include <algorithm>
#include <variant>

#include "budget/demand.hpp"
#include "config/reload.hpp"
#include "http/dialect.hpp"
#include "http/json_response.hpp"
#include "io/any_stream.hpp"
#include "routing/policy.hpp"
#include "server/admitted_exchange.hpp"
#include "server/early_forward.hpp"
#include "server/fleet_choice.hpp"
#include "server/proxy_exchange.hpp"
#include "server/worker.hpp"
#include "translate/translation.hpp"

namespace tokengate {

namespace {

// The body was forwarded early but the whole of it asks for another plan:
// the connection closes now, before the body's last byte, so the upstream
// never had a complete request (and does not wait for the rest of it while
// this request runs its course).
void abandon(worker& w, std::unique_ptr<early_forward>& early) {
  if (!early) return;
  if (early->acquired.conn) w.metrics().upstream_rq_early_abandoned.add();
  early.reset();
}

// The plan for a config without routes: the listener's upstream, body as sent.
upstream::exchange_plan passthrough_plan(std::shared_ptr<const config::config> cfg,
                                         const config::listener& listener,
                                         std::unique_ptr<early_forward>& early) {
  upstream::exchange_plan plan;
  plan.config = std::move(cfg);
  // (the listener as the newest config names its upstream: server::reload
  // refuses a config in which it names none)
  plan.upstreams.push_back(
      &plan.config->upstreams.at(config::as_configured(*plan.config, listener).upstream));
  plan.edits.resize(plan.upstreams.size());
  plan.translations.resize(plan.upstreams.size());
  plan.models.resize(plan.upstreams.size());
  if (early && early->upstream == plan.upstreams.front())
    plan.first_connection = std::move(early->acquired);
  return plan;
}

// The plan's attempts, one per target in order: the body each receives
// (the policy's edits, or translated for a target that speaks the other
// API), or why the request cannot be translated.
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
  plan.usage_asked = routed.client_asked_usage;
  return std::nullopt;
}

// The targets that can take a request in the client's API (each speaks
// it, or it can be translated for them); when none can, why.
std::optional<request_error> keep_able_targets(const config::config& cfg, fleet_choice& choice,
                                               dialect client, std::string_view path) {
  std::erase_if(choice.order, [&](const ordered_target& o) {
    return !translate::answer_dialect(client, cfg.upstreams.at(o.target->upstream).kind);
  });
  if (!choice.order.empty()) return std::nullopt;
  return request_error::client(
      400, "unsupported_api",
      "this model's upstreams speak Anthropic's Messages API only: " + std::string(path) +
          " cannot be translated to it (use /v1/chat/completions)");
}

// The policy applied to a request: the plan of its exchange, or the error to
// answer with. A plain function, not part of the coroutine: what the policy
// reads of the body (every top-level member, the route, the attempt order)
// is gone once the plan is made, instead of staying in the request's
// coroutine frame for the length of the stream (1.5 KB of each stream's
// memory, heaptrack).
//
// When the body was forwarded early, the whole body's decision must agree
// with the one sent (early_forward::agrees_with): then its target goes
// first and the plan takes its connection; otherwise the plan is made
// afresh and the caller closes that connection (abandon).
std::variant<upstream::exchange_plan, request_error> plan_with_policy(
    worker& w, std::shared_ptr<const config::config> cfg, client_request& request,
    request_context& ctx, std::string_view client_key, std::unique_ptr<early_forward>& early,
    budget::demand& demand, fleet::admission_request& admission) {
  auto decision = routing::apply_policy(*cfg, {ctx.path, body_text(request), client_key});
  if (auto* e = std::get_if<request_error>(&decision)) {
    if (e->code == "max_tokens_exceeded") w.metrics().limit_rejected.add();
    return std::move(*e);
  }
  auto& routed = std::get<routing::routed_request>(decision);
  ctx.model = routed.model;
  ctx.route = routed.route->name;
  ctx.model_label = std::string(routed.matched_pattern);
  // Accounting needs usage: ask for it, and hide it from a client that did not.
  ctx.usage_injected = routing::usage_needed(routed, ctx.path);
  ctx.limit_clamped = routed.limit_clamped;
  ctx.limit_injected = routed.limit_injected;
  if (routed.limit_clamped) w.metrics().limit_clamped.add();
  if (routed.limit_injected) w.metrics().limit_injected.add();
  demand = budget::demand_for(*cfg, *routed.route, routed.key, routed.model,
                              body_text(request).size(), routed.output_limit);

  auto chosen = choose_targets(w, *cfg, routed, body_text(request), 0);
  if (auto* e = std::get_if<request_error>(&chosen)) return std::move(*e);
  auto& choice = std::get<fleet_choice>(chosen);
  if (auto e = keep_able_targets(*cfg, choice, ctx.dialect, ctx.path)) return std::move(*e);
  auto& order = choice.order;
  // The early target goes first; not in the order (taken out of rotation
  // meanwhile), or a decision that disagrees: the caller abandons it.
  bool take_early = false;
  if (early && early->agrees_with(routed, ctx.path))
    if (auto sent = std::find_if(order.begin(), order.end(),
                                 [&](const auto& o) { return o.target == early->target; });
        sent != order.end()) {
      std::rotate(order.begin(), sent, sent + 1);
      take_early = true;
    }
  if (routed.route->retries >= 0 &&
      order.size() > static_cast<std::size_t>(routed.route->retries) + 1)
    order.resize(static_cast<std::size_t>(routed.route->retries) + 1);
  admission = admission_for(routed, choice);
  upstream::exchange_plan plan;
  plan.config = cfg;
  if (auto refused = add_attempts(plan, order, body_text(request), ctx, routed))
    return std::move(*refused);
  if (take_early) plan.first_connection = std::move(early->acquired);
  plan.output_limit = routed.output_limit;
  ctx.output_limit = routed.output_limit;
  plan.retry_backoff = routed.route->retry_backoff;
  plan.retry = routed.route->retry;
  plan.resume = routed.route->resume;
  if (routed.limit_clamped)
    plan.response_headers.emplace_back("x-tokengate-limit-clamped",
                                       "requested=" + std::to_string(*routed.requested_limit) +
                                           "; applied=" + std::to_string(*routed.output_limit));
  return plan;
}

}  // namespace

net::awaitable<bool> dispatch_request(any_stream& stream, client_watcher& watcher,
                                      client_request& request, worker& w,
                                      const config::listener& listener, request_context& ctx,
                                      bool keep_alive, std::unique_ptr<early_forward>& early) {
  auto target = request.head.target;
  const bool is_get_models = request.head.method == http::verb::get && ctx.path == "/v1/models";
  const bool is_post_api = request.head.method == http::verb::post && is_proxied_post(ctx.path);

  if (target.empty() || target.front() != '/') {
    // Absolute-form targets would let a client pick the upstream: never.
    co_await send_error(
        stream, request_error::client(400, "invalid_target", "request target must be a path"),
        keep_alive, ctx);
    co_return keep_alive;
  }
  if (!is_get_models && !is_post_api) {
    if (is_proxied_post(ctx.path) || ctx.path == "/v1/models")
      co_await send_error(
          stream,
          request_error::client(405, "method_not_allowed",
                                "method " + ctx.method + " not allowed on " + ctx.path),
          keep_alive, ctx);
    else
      co_await send_error(stream,
                          request_error::client(404, "unknown_url", "unknown path " + ctx.path),
                          keep_alive, ctx);
    co_return keep_alive;
  }

  // This request's policy, whatever a reload does meanwhile (the one its
  // body was forwarded under, if it was).
  auto cfg = early ? early->config : w.snapshot();
  if (cfg->routes.empty()) {
    ctx.route = "listener:" + listener.name;
    ctx.model_label = "*";
    // No policy to apply, but malformed JSON (bad syntax, invalid UTF-8,
    // lone surrogates, runaway nesting) still stops here, not upstream.
    routing::scan_error invalid;
    if (is_post_api && !routing::scan_object(body_text(request), invalid)) {
      abandon(w, early);
      co_await send_error(
          stream,
          request_error::client(400, "invalid_json",
                                "request body is not a valid JSON object: " + invalid.message),
          keep_alive, ctx);
      co_return keep_alive;
    }
    auto plan = passthrough_plan(cfg, listener, early);
    abandon(w, early);  // (nothing left when the plan took the connection)
    co_return co_await proxy_exchange(stream, watcher, request, w, plan, ctx) && keep_alive;
  }

  auto client_key = routing::client_key_from(request.head.value_of(known_field::authorization),
                                             request.head.value_of(known_field::x_api_key));
  if (is_get_models) {
    auto auth = routing::authenticate(*cfg, client_key);
    if (auto* e = std::get_if<request_error>(&auth)) {
      co_await send_error(stream, std::move(*e), keep_alive, ctx);
    } else {
      co_await send_json(stream,
                         routing::models_list_json(*cfg, std::get<const config::client_key*>(auth)),
                         keep_alive, ctx);
    }
    co_return keep_alive;
  }

  budget::demand demand;
  fleet::admission_request admission;
  auto planned =
      plan_with_policy(w, std::move(cfg), request, ctx, client_key, early, demand, admission);
  abandon(w, early);  // (nothing left when the plan took the connection)
  if (auto* e = std::get_if<request_error>(&planned)) {
    co_await send_error(stream, std::move(*e), keep_alive, ctx);
    co_return keep_alive;
  }
  auto& plan = std::get<upstream::exchange_plan>(planned);
  bool keep = co_await admitted_exchange(stream, watcher, request, w, plan, ctx, std::move(demand),
                                         std::move(admission), keep_alive);
  co_return keep;
}

}  // namespace tokengate
