#include "upstream/exchange.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <span>

#include "http/body_decoder.hpp"
#include "http/read_message.hpp"
#include "io/write_all.hpp"
#include "upstream/health.hpp"
#include "upstream/request.hpp"
#include "upstream/retry_policy.hpp"

namespace tokengate::upstream {
namespace {

using clock = std::chrono::steady_clock;

// What every attempt of one exchange works with.
struct attempts {
  exchange_state& s;
  const client_request& request;
  exchange_plan& plan;
  worker_upstreams& upstreams;
  metrics::shard& metrics;
};

// One attempt's end: an answer to relay (no failure), or why not. `kind`
// says what a retry would judge (retry_policy.hpp): set for every failure,
// and for an answer that may be replaced (a 429, a 5xx, a 400 saying the
// prompt is too long), whose connection is kept open until the caller
// decides.
struct attempt_outcome {
  std::optional<request_error> failure;
  std::optional<attempt_failure> kind;
  std::optional<std::chrono::milliseconds> retry_after;
  bool holds_answer() const { return !failure; }
};

config::duration until(clock::time_point deadline, config::duration phase_limit) {
  auto left = std::chrono::duration_cast<config::duration>(deadline - clock::now());
  if (left < config::duration(1)) left = config::duration(1);
  return std::min(left, phase_limit);
}

// Passive health: a connect error, timeout or 5xx counts against the
// upstream; the failure that ejects it is counted and logged once.
void note_upstream_failure(attempts& a, const config::upstream& u) {
  const auto& policy = *a.plan.config;
  if (!a.upstreams.health().record_failure(u.name, policy.health, clock::now())) return;
  a.metrics.upstream_ejections.add();
  spdlog::warn(
      "upstream '{}' ejected for {} ms after {} consecutive failures (this worker)", u.name,
      std::chrono::duration_cast<std::chrono::milliseconds>(policy.health.cooldown).count(),
      policy.health.eject_after);
}

// Before a fallback: a jittered backoff, counted and logged.
net::awaitable<void> pause_before_fallback(attempts& a, std::size_t attempt,
                                           const config::upstream& next,
                                           const std::optional<request_error>& last_failure) {
  auto pause = backoff_for(static_cast<int>(attempt), a.plan.retry_backoff, a.upstreams.rng());
  if (pause.count() > 0) {
    net::steady_timer timer(a.s.client.get_executor(), pause);
    co_await timer.async_wait(use_tuple);
  }
  if (a.s.ctx.client_gone) co_return;
  a.metrics.upstream_rq_fallback.add();  // (moving on at once counts too: open_answer)
  spdlog::info("request {}: falling back to upstream {} ({})", a.s.ctx.request_id, next.name,
               last_failure ? last_failure->message : "");
}

attempt_outcome connect_error(attempts& a, const config::upstream& settings,
                              const acquire_result& acquired) {
  a.metrics.upstream_cx_connect_fail.add();
  note_upstream_failure(a, settings);
  spdlog::warn("request {}: {}", a.s.ctx.request_id, acquired.message);
  bool timeout = acquired.failure == connect_failure::timeout;
  return {request_error::upstream(timeout ? 504u : 502u,
                                  timeout ? "upstream_timeout" : "upstream_unavailable",
                                  acquired.message),
          timeout ? attempt_failure::timeout : attempt_failure::refused, std::nullopt};
}

// The connection taken: the first byte's deadline set, the timing noted.
void use_connection(attempts& a, std::unique_ptr<connection> conn, bool early, const answer& got) {
  auto& ctx = a.s.ctx;
  a.s.upstream = std::move(conn);
  if (!early) ctx.upstream_connected = clock::now();  // (forwarded: when the body began to go)
  ctx.forwarded_early = early;
  if (a.s.upstream->reused) a.metrics.upstream_cx_reused.add();
  a.s.upstream->stream.expires_after(until(got.deadline, got.settings->timeouts.first_byte));
}

void drop_connection(attempts& a) {
  a.s.upstream->stream.close();
  a.s.upstream.reset();
}

attempt_outcome head_failure(attempts& a, const config::upstream& settings, const error_code& ec) {
  const bool timeout = ec == beast::error::timeout;
  if (timeout) a.metrics.upstream_rq_timeout.add();
  note_upstream_failure(a, settings);
  auto failure = upstream_error_for(ec, settings, true);
  spdlog::warn("request {}: {}", a.s.ctx.request_id, failure.message);
  return {std::move(failure), head_failure_kind(ec), std::nullopt};
}

// An error answer's body, read whole into the answer's buffer (where the
// relay finds it, still framed, should the answer go to the client after
// all), at most `limit` bytes; its decoded text, or nullopt when it could
// not be read whole.
net::awaitable<std::optional<std::string>> read_error_body(any_stream& stream, answer& got,
                                                           std::size_t limit) {
  for (;;) {
    auto decoder = !got.head.has_body()      ? body_decoder::none()
                   : got.head.chunked        ? body_decoder::chunked()
                   : got.head.content_length ? body_decoder::with_length(*got.head.content_length)
                                             : body_decoder::until_close();
    auto bytes = got.buffer.data();
    std::string copy(static_cast<const char*>(bytes.data()), bytes.size());
    error_code ec;
    auto part = decoder.done() ? body_decoder::result() : decoder.decode(copy, ec);
    if (ec) co_return std::nullopt;
    if (decoder.done()) co_return copy.substr(part.begin, part.size);
    if (got.buffer.size() >= limit) co_return std::nullopt;
    auto [read_ec, n] = co_await stream.async_read_some(got.buffer.prepare(4096), use_tuple);
    got.buffer.commit(n);
    if (read_ec) co_return std::nullopt;
  }
}

// An answer's status: counted for health, and judged. A 429 or a 5xx may
// be replaced (by a retry or the next target); a 400 may be, when it says
// the prompt is too long and a later target has more context
// (`may_reroute_context`); anything else goes to the client.
net::awaitable<attempt_outcome> judge_answer(attempts& a, const config::upstream& settings,
                                             answer& got, bool may_reroute_context) {
  const unsigned status = got.head.status;
  if (status >= 500)
    note_upstream_failure(a, settings);
  else
    a.upstreams.health().record_success(settings.name);
  attempt_outcome out;
  if (status == 429) {
    out.kind = attempt_failure::rate_limited;
    out.retry_after =
        parse_retry_after(got.head.value_of("retry-after"), std::chrono::system_clock::now());
  } else if (status >= 500) {
    out.kind = attempt_failure::server_error;
  } else if (may_reroute_context && (status == 400 || status == 413 || status == 422)) {
    auto body = co_await read_error_body(a.s.upstream->stream, got, 64 * 1024);
    if (body && says_context_too_long(*body)) out.kind = attempt_failure::context_too_long;
  }
  co_return out;
}

// The failure a replaced answer stands for, should the client get none.
request_error replaced_answer_error(const config::upstream& settings, unsigned status) {
  return request_error::upstream(
      status, "upstream_status",
      "upstream '" + settings.name + "' answered " + std::to_string(status));
}

// The request target an attempt writes: a translated request's own, else
// the client's.
std::string_view target_of(const exchange_plan& plan, std::size_t attempt) {
  if (attempt < plan.translations.size() && plan.translations[attempt])
    return plan.translations[attempt]->target;
  return {};
}

// Where the answer comes from, and by when it must be whole.
// (got.in_flight: set by the caller, which looked it up.)
void aim_answer(answer& got, pool& from, const config::upstream& settings, std::size_t attempt,
                const request_context& ctx) {
  got.from = &from;
  got.settings = &settings;
  got.attempt = attempt;
  got.deadline = ctx.request_read + settings.timeouts.total;
}

// The request as this attempt writes it: its head in `head`, the body
// around the attempt's edits (a prefill's own when it prefills).
std::vector<net::const_buffer> request_pieces(attempts& a, pool& to, std::size_t attempt,
                                              std::string& head) {
  const auto& edits = a.s.prefills(attempt) ? a.s.prefill->edits : a.plan.edits[attempt];
  return upstream_request(a.request, to, *a.plan.upstreams[attempt], a.s.ctx, edits,
                          target_of(a.plan, attempt), head);
}

// One target: a connection (the one the body went on while it arrived, a
// pooled one, or after a stale one a new one), the request written (head
// and body in one scatter write, or the last byte of a body forwarded
// early), the answer's head read. A stale pooled connection is retried
// once on a new one. (One coroutine: each awaited sub-coroutine is a frame
// allocated and entered per request.)
net::awaitable<attempt_outcome> attempt_upstream(attempts& a, std::size_t attempt,
                                                 bool may_reroute_context, answer& got) {
  auto& ctx = a.s.ctx;
  const auto& settings = *a.plan.upstreams[attempt];
  auto& pool = a.upstreams.pool_for(settings);
  aim_answer(got, pool, settings, attempt, ctx);
  std::string up_head;
  std::vector<net::const_buffer> up_pieces;  // made when first needed: a forwarded body needs none
  // The connection the body went on while it arrived (attempt 0 only): only
  // the body's last byte is left to send on it. Let go unused (this attempt
  // skipped), it closes before that byte.
  auto forwarded =
      attempt == 0 ? std::exchange(a.plan.first_connection, std::nullopt) : std::nullopt;
  // (No edit reaches the body's last byte: they end at or before its closing brace.)
  const auto body = body_text(a.request);
  const auto last_byte = body.empty() ? net::const_buffer() : net::const_buffer(&body.back(), 1);

  for (int stale_retry = 0;; ++stale_retry) {
    const bool early = stale_retry == 0 && forwarded;
    acquire_result acquired;
    // (No ternary between two awaitables: GCC 12 destroys the wrong temporary.)
    if (early)
      acquired = std::move(*forwarded);
    else if (stale_retry == 0)
      acquired = co_await pool.acquire();
    else
      acquired = co_await pool.connect_new();
    if (ctx.client_gone) co_return attempt_outcome{request_error::disconnected()};
    if (!acquired.conn) co_return connect_error(a, settings, acquired);
    use_connection(a, std::move(acquired.conn), early, got);
    if (!early && up_pieces.empty()) up_pieces = request_pieces(a, pool, attempt, up_head);
    std::span<const net::const_buffer> to_send = up_pieces;
    if (early) to_send = std::span<const net::const_buffer>(&last_byte, 1);
    auto& up_stream = a.s.upstream->stream;
    auto [ec, n] = co_await write_all(up_stream, to_send);
    ctx.request_sent = clock::now();
    if (!ec) {
      in_flight busy(*got.in_flight);
      up_stream.nothing_to_read_yet();  // (the answer cannot be there yet)
      constexpr std::size_t head_limit = 64 * 1024;
      got.head = {};
      got.buffer.clear();
      ec = co_await read_response_head(up_stream, got.buffer, got.head, head_limit);
    }
    if (ctx.client_gone) co_return attempt_outcome{request_error::disconnected()};
    if (ec) {
      bool stale = a.s.upstream->reused && stale_retry == 0 && ec != beast::error::timeout;
      drop_connection(a);
      if (stale) continue;
      co_return head_failure(a, settings, ec);
    }
    auto judged = co_await judge_answer(a, settings, got, may_reroute_context);
    co_return judged;
  }
}

// An attempt's client span, when the request is traced: its id goes
// upstream as the parent (upstream/request.cpp).
void begin_attempt_span(request_context& ctx, const exchange_plan& plan, std::size_t attempt,
                        const pool& to) {
  if (!ctx.trace.active) return;
  auto& span = ctx.attempt_spans.emplace_back();
  span.id = new_span_id();
  span.upstream = ctx.upstream;
  span.server_address = to.url().host_header;
  if (attempt < plan.models.size()) span.model = plan.models[attempt];
  span.start = clock::now();
}

void end_attempt_span(request_context& ctx, const answer& got,
                      const std::optional<request_error>& failure) {
  if (!ctx.trace.active || ctx.attempt_spans.empty()) return;
  auto& span = ctx.attempt_spans.back();
  span.end = clock::now();  // (the answering attempt's ends with the exchange: trace/)
  span.status = failure ? failure->status : got.head.status;
  if (failure) span.error_code = failure->code;
}

// The first target after `attempt` that declares more context than it
// (capacity.max_context_tokens; one that declares none counts as 0), or
// the plan's size when there is none.
std::size_t next_larger_context(const exchange_plan& plan, std::size_t attempt) {
  const auto refused = plan.upstreams[attempt]->capacity.max_context_tokens;
  for (auto next = attempt + 1; next < plan.upstreams.size(); ++next)
    if (plan.upstreams[next]->capacity.max_context_tokens > refused) return next;
  return plan.upstreams.size();
}

// One target, tried again as retry_policy.hpp says: the last try's outcome
// (with `kind` set when the caller is to move on from the target).
net::awaitable<attempt_outcome> tries_on_target(attempts& a, std::size_t attempt,
                                                bool may_reroute_context, answer& got) {
  auto& ctx = a.s.ctx;
  const auto& settings = *a.plan.upstreams[attempt];
  for (int tries = 1;; ++tries) {
    ++ctx.attempts;
    ctx.upstream = settings.name;
    begin_attempt_span(ctx, a.plan, attempt, a.upstreams.pool_for(settings));
    auto outcome = co_await attempt_upstream(a, attempt, may_reroute_context, got);
    end_attempt_span(ctx, got, outcome.failure);
    if (ctx.client_gone || !outcome.kind) co_return outcome;
    auto wait = retry_same_target(*outcome.kind, tries, outcome.retry_after, a.plan.retry,
                                  a.plan.retry_backoff, a.upstreams.rng());
    if (!wait || !a.upstreams.retries().take(settings.name, a.plan.retry, clock::now()))
      co_return outcome;
    a.metrics.retries.add({ctx.route, settings.name, std::string(reason_name(*outcome.kind))});
    spdlog::info("request {}: {} from upstream {}; trying it again in {} ms", ctx.request_id,
                 reason_name(*outcome.kind), settings.name, wait->count());
    if (outcome.holds_answer()) drop_connection(a);
    if (wait->count() > 0) {
      net::steady_timer timer(a.s.client.get_executor(), *wait);
      co_await timer.async_wait(use_tuple);
    }
    if (ctx.client_gone) co_return attempt_outcome{request_error::disconnected()};
  }
}

}  // namespace

request_error upstream_error_for(const error_code& ec, const config::upstream& u,
                                 bool waiting_first_byte) {
  if (ec == beast::error::timeout) {
    if (waiting_first_byte)
      return request_error::upstream(504, "upstream_timeout",
                                     "upstream '" + u.name + "' sent no response within " +
                                         std::to_string(u.timeouts.first_byte.count()) + " ms");
    return request_error::upstream(504, "upstream_timeout", "upstream '" + u.name + "' stalled");
  }
  if (ec ==
      http::error::bad_status)  // (also a 101, or interim answers without end: read_message.hpp)
    return request_error::upstream(502, "upstream_error",
                                   "upstream '" + u.name + "' sent a status the proxy cannot relay",
                                   false);
  return request_error::upstream(502, "upstream_error",
                                 "upstream '" + u.name + "' failed: " + ec.message());
}

net::awaitable<std::optional<request_error>> open_answer(
    exchange_state& s, const client_request& request, exchange_plan& plan,
    worker_upstreams& upstreams, metrics::shard& metrics, answer& got, std::size_t first_attempt) {
  attempts a{s, request, plan, upstreams, metrics};
  auto& ctx = s.ctx;
  std::optional<request_error> last_failure;
  bool pause_first = false;  // (moving on after a timeout or a context refusal: at once)
  for (std::size_t attempt = first_attempt; attempt < plan.upstreams.size();) {
    const auto& settings = *plan.upstreams[attempt];
    if (pause_first) {
      co_await pause_before_fallback(a, attempt, settings, last_failure);
      if (ctx.client_gone) co_return request_error::disconnected();
    } else if (attempt > 0) {
      metrics.upstream_rq_fallback.add();
    }
    got.in_flight = &upstreams.active_streams(settings.name);
    if (settings.max_concurrent_streams && *got.in_flight >= settings.max_concurrent_streams) {
      ctx.upstream = settings.name;
      last_failure = request_error::upstream(
          503, "upstream_overloaded",
          "upstream '" + settings.name + "' is at its concurrent stream limit");
      pause_first = true;
      ++attempt;
      continue;
    }
    const std::size_t larger = next_larger_context(plan, attempt);
    auto outcome = co_await tries_on_target(a, attempt, larger < plan.upstreams.size(), got);
    if (ctx.client_gone) co_return request_error::disconnected();
    if (!outcome.kind) co_return outcome.failure;  // an answer for the client, or its error
    // Moving on from this target: to the next, or to the next with more
    // context; with none left, its own answer (a 429, a 5xx, the 400)
    // goes to the client as it is.
    const std::size_t next =
        *outcome.kind == attempt_failure::context_too_long ? larger : attempt + 1;
    if (next >= plan.upstreams.size() && outcome.holds_answer()) co_return std::nullopt;
    if (outcome.holds_answer()) {
      last_failure = replaced_answer_error(settings, got.head.status);
      drop_connection(a);
    } else {
      last_failure = std::move(outcome.failure);
    }
    pause_first = *outcome.kind != attempt_failure::timeout &&
                  *outcome.kind != attempt_failure::context_too_long;
    attempt = next;
  }
  co_return last_failure.value_or(
      request_error::upstream(502, "upstream_unavailable", "no upstream to try"));
}

}  // namespace tokengate::upstream
