#include "server/passthrough.hpp"

#include "config/reload.hpp"
#include "http/json_response.hpp"
#include "io/any_stream.hpp"
#include "routing/json_scan.hpp"
#include "server/early_forward.hpp"
#include "server/proxy_exchange.hpp"
#include "server/worker.hpp"

namespace tokengate {

namespace {

// The listener's upstream, body as sent; the connection the body was
// forwarded early on, when it went there.
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

std::optional<request_error> refuse_invalid_json(const client_request& request,
                                                 const request_context& ctx) {
  routing::scan_error invalid;
  if (request.head.method != http::verb::post || routing::scan_object(body_text(request), invalid))
    return std::nullopt;
  return request_error::client(400, "invalid_json",
                               "request body is not a valid JSON object: " + invalid.message);
}

}  // namespace

net::awaitable<bool> pass_through(any_stream& stream, client_watcher& watcher,
                                  client_request& request, worker& w,
                                  std::shared_ptr<const config::config> cfg,
                                  const config::listener& listener, request_context& ctx,
                                  bool keep_alive, std::unique_ptr<early_forward>& early) {
  ctx.route = "listener:" + listener.name;
  ctx.model_label = "*";
  if (auto invalid = refuse_invalid_json(request, ctx)) {
    abandon_early_forward(w, early);
    co_await send_error(stream, std::move(*invalid), keep_alive, ctx);
    co_return keep_alive;
  }
  auto plan = passthrough_plan(std::move(cfg), listener, early);
  abandon_early_forward(w, early);  // (nothing left when the plan took the connection)
  co_return co_await proxy_exchange(stream, watcher, request, w, plan, ctx) && keep_alive;
}

}  // namespace tokengate
