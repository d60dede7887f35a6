#include "server/dispatch.hpp"

#include <variant>

#include "budget/demand.hpp"
#include "http/json_response.hpp"
#include "io/any_stream.hpp"
#include "server/admitted_exchange.hpp"
#include "server/attempt_plan.hpp"
#include "server/cache_phase.hpp"
#include "server/early_forward.hpp"
#include "server/models_list.hpp"
#include "server/passthrough.hpp"
#include "server/request_checks.hpp"
#include "server/route_phase.hpp"
#include "server/target_order.hpp"
#include "server/worker.hpp"

namespace tokengate {

namespace {

// What the planning phases hand the exchange.
struct planned_request {
  upstream::exchange_plan plan;
  budget::demand demand;               // what the budget reserves
  fleet::admission_request admission;  // what the fleet is asked for
  cache_decision cache;                // a hit, or a miss whose answer may be kept
};

// The planning phases, in order: route, look up the cache (a hit needs
// nothing more), order the targets, plan the attempts. A plain function, not part of the coroutine:
// what they read of the body (every top-level member, the route, the attempt order) is gone once
// the plan is made, instead of staying in the request's coroutine frame for the length of the
// stream (1.5 KB of each stream's memory, heaptrack).
//
// When the body was forwarded early, the whole body's decision must agree
// with the one sent (early_forward::agrees_with): then its target goes
// first and the plan takes its connection; otherwise the caller closes it.
std::variant<planned_request, request_error> plan_request(
    worker& w, std::shared_ptr<const config::config> cfg, const client_request& request,
    std::string_view client_key, request_context& ctx, early_forward* early) {
  auto routed = route_request(w, *cfg, body_text(request), client_key, ctx);
  if (auto* e = std::get_if<request_error>(&routed)) return std::move(*e);
  const auto& r = std::get<routing::routed_request>(routed);
  planned_request planned;
  planned.demand =
      budget::demand_for(*cfg, *r.route, r.key, r.model, body_text(request).size(), r.output_limit);
  planned.cache = look_up_answer(w, r, request, ctx);
  if (planned.cache.hit) return planned;
  auto targets = order_targets(w, *cfg, r, body_text(request), ctx, early);
  if (auto* e = std::get_if<request_error>(&targets)) return std::move(*e);
  const auto& ordered = std::get<ordered_targets>(targets);
  planned.admission = admission_for(r, ordered.choice);
  auto plan = plan_attempts(std::move(cfg), ordered, r, body_text(request), ctx, early);
  if (auto* e = std::get_if<request_error>(&plan)) return std::move(*e);
  planned.plan = std::move(std::get<upstream::exchange_plan>(plan));
  prepare_exchange(planned.cache, planned.plan, ctx);
  return planned;
}

net::awaitable<bool> refuse(any_stream& stream, request_error error, bool keep_alive,
                            request_context& ctx) {
  co_await send_error(stream, std::move(error), keep_alive, ctx);
  co_return keep_alive;
}

}  // namespace

// The request's phases, in order: check the head, take the policy, then
// either pass through (no routes) or answer the models list, or plan
// (route, cache, targets, attempts: plan_request), look up the cache in
// Redis where it is kept there, then answer a cache hit, or admit (budget, fleet), exchange and
// keep the answer for the cache; the session records the request at its end.
net::awaitable<bool> dispatch_request(any_stream& stream, client_watcher& watcher,
                                      client_request& request, worker& w,
                                      const config::listener& listener, request_context& ctx,
                                      bool keep_alive, std::unique_ptr<early_forward>& early) {
  if (auto refused = refuse_target_or_method(request, ctx))
    co_return co_await refuse(stream, std::move(*refused), keep_alive, ctx);
  // This request's policy, whatever a reload does meanwhile (the one its
  // body was forwarded under, if it was).
  auto cfg = early ? early->config : w.snapshot();
  if (cfg->routes.empty())
    co_return co_await pass_through(stream, watcher, request, w, std::move(cfg), listener, ctx,
                                    keep_alive, early);
  auto client_key = routing::client_key_from(request.head.value_of(known_field::authorization),
                                             request.head.value_of(known_field::x_api_key));
  if (is_models_list(request, ctx))
    co_return co_await answer_models_list(stream, *cfg, client_key, keep_alive, ctx);

  auto planned = plan_request(w, std::move(cfg), request, client_key, ctx, early.get());
  abandon_early_forward(w, early);  // (nothing left when the plan took the connection)
  if (auto* e = std::get_if<request_error>(&planned))
    co_return co_await refuse(stream, std::move(*e), keep_alive, ctx);
  auto& p = std::get<planned_request>(planned);
  co_await look_up_shared(w, p.cache, ctx);
  if (p.cache.hit)
    co_return co_await answer_from_cache(stream, w, p.cache, request, ctx, std::move(p.demand),
                                         keep_alive);
  bool keep = co_await admitted_exchange(stream, watcher, request, w, p.plan, ctx,
                                         std::move(p.demand), std::move(p.admission), keep_alive);
  keep_answer(w, p.cache, p.plan, ctx);
  co_return keep;
}

}  // namespace tokengate
