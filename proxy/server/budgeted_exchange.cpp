#include "server/budgeted_exchange.hpp"

#include "budget/gate.hpp"
#include "http/json_response.hpp"
#include "server/proxy_exchange.hpp"
#include "server/worker.hpp"

namespace tokengate {
namespace {

// Settles an admitted reservation whatever ends the exchange (an exception
// included): with the usage the request recorded.
class settle_at_end {
 public:
  settle_at_end(budget::gate& gate, budget::admission& a, const request_context& ctx)
      : gate_(gate), a_(a), ctx_(ctx) {}
  ~settle_at_end() { gate_.settle(a_, usage_of(ctx_, *a_.asked)); }

 private:
  budget::gate& gate_;
  budget::admission& a_;
  const request_context& ctx_;
};

net::awaitable<void> refuse(any_stream& client, const budget::admission& a, bool keep_alive,
                            request_context& ctx) {
  const bool anthropic = ctx.path == "/v1/messages";
  error_extras extras;
  extras.headers = a.headers;
  if (a.outcome == budget::admission::verdict::refused) {
    extras.headers.emplace_back("retry-after", budget::retry_after(*a.asked, a.held));
    if (anthropic) extras.anthropic_type = "rate_limit_error";
    co_await send_error(client, budget::refusal(*a.asked, a.held), keep_alive, ctx, extras);
  } else {
    extras.headers.emplace_back("retry-after", "1");
    if (anthropic) extras.anthropic_type = "api_error";
    co_await send_error(client, budget::store_unavailable(), keep_alive, ctx, extras);
  }
}

}  // namespace

budget::usage usage_of(const request_context& ctx, const budget::demand& d) {
  const bool answered = ctx.upstream_headers != clock::time_point{};
  const bool has_usage = ctx.input_tokens || ctx.output_tokens;
  if (!answered || (ctx.status >= 400 && !has_usage)) return {};
  budget::usage u;
  u.input_tokens = ctx.input_tokens.value_or(d.estimate.input_tokens);
  if (ctx.output_tokens)
    u.output_tokens = *ctx.output_tokens;
  else
    u.output_tokens =
        ctx.streamed ? static_cast<long long>(ctx.content_events) : d.estimate.output_tokens;
  return u;
}

net::awaitable<bool> budgeted_exchange(any_stream& client, client_watcher& watcher,
                                       client_request& request, worker& w,
                                       upstream::exchange_plan& plan, request_context& ctx,
                                       budget::demand demand, bool keep_alive) {
  auto a = co_await w.budgets().admit(std::move(demand));
  if (a.outcome != budget::admission::verdict::admitted) {
    co_await refuse(client, a, keep_alive, ctx);
    co_return keep_alive;
  }
  plan.response_headers.insert(plan.response_headers.end(), a.headers.begin(), a.headers.end());
  settle_at_end settle(w.budgets(), a, ctx);
  bool keep = co_await proxy_exchange(client, watcher, request, w, plan, ctx);
  co_return keep&& keep_alive;
}

}  // namespace tokengate
