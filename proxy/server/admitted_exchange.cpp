#include "server/admitted_exchange.hpp"

#include <optional>

#include "budget/gate.hpp"
#include "http/json_response.hpp"
#include "server/fleet_choice.hpp"
#include "server/proxy_exchange.hpp"
#include "server/worker.hpp"

namespace tokengate {
namespace {

// A reservation's end whatever ends the exchange (an exception included):
// settled with the usage the request recorded, or given back whole when
// the request was refused before any upstream call.
class reservation_end {
 public:
  reservation_end(budget::gate& gate, std::optional<budget::admission>& held,
                  const request_context& ctx)
      : gate_(gate), held_(held), ctx_(ctx) {}
  ~reservation_end() {
    if (!held_) return;
    if (refused_before_upstream_)
      gate_.give_back(*held_);
    else
      gate_.settle(*held_, usage_of(ctx_, *held_->asked));
  }
  void refused_before_upstream() { refused_before_upstream_ = true; }

 private:
  budget::gate& gate_;
  std::optional<budget::admission>& held_;
  const request_context& ctx_;
  bool refused_before_upstream_ = false;
};

// (With the budget's x-ratelimit-* headers, when it admitted the request.)
net::awaitable<void> refuse_by_fleet(any_stream& client, const request_error& r,
                                     const std::optional<budget::admission>& reserved,
                                     bool keep_alive, request_context& ctx) {
  auto extras = refusal_extras(r, ctx.path);
  if (reserved)
    extras.headers.insert(extras.headers.end(), reserved->headers.begin(), reserved->headers.end());
  co_await send_error(client, r, keep_alive, ctx, extras);
}

// balance: fastest. The choice is recorded (the access log, the span);
// the replica that took the request holds its prompt from now on (its
// slot put it in the index).
void note_prediction(const fleet::candidate& c, const fleet::admitted& taken,
                     request_context& ctx) {
  ctx.wants_cached_tokens = true;
  ctx.fleet_predicted_ms = 1000 * c.predicted_s;
  ctx.fleet_matched_tokens = c.matched_tokens;
  ctx.fleet_reason = taken.index > 0 ? "only_one_free" : c.matched_tokens > 0 ? "cache" : "load";
}

// … and its answer teaches the replica's index what the engine reported
// cached (an eviction there drops blocks here), and its model the time to
// the first token of a request that found a slot free at once, against
// the prompt tokens it was predicted not to hold and those in prefill
// there before it.
void learn_from_answer(worker& w, const std::vector<std::uint64_t>& blocks,
                       const fleet::candidate& c, const fleet::admitted& taken,
                       const request_context& ctx) {
  if (ctx.cached_tokens) {  // what the engine held, against what was predicted
    c.load->predicted_cached_tokens.fetch_add(c.matched_tokens, std::memory_order_relaxed);
    c.load->reported_cached_tokens.fetch_add(*ctx.cached_tokens, std::memory_order_relaxed);
    if (ctx.input_tokens)
      c.load->reported_prompt_tokens.fetch_add(*ctx.input_tokens, std::memory_order_relaxed);
    c.load->index.correct(blocks, c.matched_tokens, *ctx.cached_tokens);
  }
  const bool answered = ctx.first_token != clock::time_point{} && ctx.resumes == 0;
  if (!answered || c.ahead > 0 || taken.waited.count() > 0) return;
  const double seconds = std::chrono::duration<double>(ctx.first_token - ctx.request_sent).count();
  c.load->ttft.observe_prefill(static_cast<double>(c.uncached_tokens + c.prefill_ahead), seconds);
  w.fleet().note_prediction_error(c.predicted_s, seconds);
}

}  // namespace

net::awaitable<void> refuse_by_budget(any_stream& client, const budget::admission& a,
                                      bool keep_alive, request_context& ctx) {
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
  // Of the prompt, what the upstream's cache held and what it wrote there
  // (their own prices).
  u.cached_input_tokens = ctx.cached_tokens.value_or(0);
  u.cache_write_tokens = ctx.cache_write_tokens.value_or(0);
  // A resumed stream: what its failed attempts cost upstream too (at the
  // full input price: what they found cached is not known).
  u.input_tokens += static_cast<long long>(ctx.failed_attempts) * u.input_tokens;
  u.output_tokens += static_cast<long long>(ctx.failed_attempts_output);
  return u;
}

// The phases in order: budget, fleet slot, exchange.
net::awaitable<bool> admitted_exchange(any_stream& client, client_watcher& watcher,
                                       client_request& request, worker& w,
                                       upstream::exchange_plan& plan, request_context& ctx,
                                       budget::demand demand, fleet::admission_request slot,
                                       bool keep_alive) {
  std::optional<budget::admission> reserved;
  if (!demand.empty()) {
    reserved = co_await w.budgets().admit(std::move(demand));
    if (reserved->outcome != budget::admission::verdict::admitted) {
      co_await refuse_by_budget(client, *reserved, keep_alive, ctx);
      co_return keep_alive;
    }
    plan.response_headers.insert(plan.response_headers.end(), reserved->headers.begin(),
                                 reserved->headers.end());
  }
  reservation_end end_of_reservation(w.budgets(), reserved, ctx);

  // A slot on the upstream, held to the end of the exchange (waiting for
  // one when the route's targets are full and it has a queue).
  // (balance: fastest: what the choice predicted, for what comes after)
  const auto blocks = slot.blocks;
  const auto candidates = blocks ? slot.candidates : std::vector<fleet::candidate>();
  auto admitted = co_await w.fleet().admit(std::move(slot));
  if (auto* refused = std::get_if<request_error>(&admitted)) {
    end_of_reservation.refused_before_upstream();
    co_await refuse_by_fleet(client, *refused, reserved, keep_alive, ctx);
    co_return keep_alive;
  }
  ctx.admitted = clock::now();
  auto& taken = std::get<fleet::admitted>(admitted);
  put_first(plan, taken.index);
  if (blocks) note_prediction(candidates[taken.index], taken, ctx);
  ctx.on_first_token = &taken.held;  // (its prefill ends there)
  bool keep = co_await proxy_exchange(client, watcher, request, w, plan, ctx);
  ctx.on_first_token = nullptr;
  if (blocks) learn_from_answer(w, *blocks, candidates[taken.index], taken, ctx);
  co_return keep&& keep_alive;
}

}  // namespace tokengate
