#include "server/proxy_exchange.hpp"

#include "http/json_response.hpp"
#include "io/write_all.hpp"
#include "server/resumption.hpp"
#include "server/worker.hpp"
#include "stream/client_framing.hpp"
#include "stream/error_event.hpp"
#include "stream/relay.hpp"
#include "translate/errors.hpp"

namespace tokengate {
namespace {

// What the exchange leaves behind, whatever its end (an exception
// included): the watcher told to stop, an upstream connection not given
// back to its pool closed (it is not reusable).
class exchange_end {
 public:
  exchange_end(upstream::exchange_state& s, client_watcher& watcher) : s_(s), watcher_(watcher) {}
  ~exchange_end() { close(); }
  void close() {
    if (closed_) return;
    closed_ = true;
    s_.finished = true;
    if (s_.upstream) s_.upstream->stream.close();
    // A read of the watcher's still pending goes on as the session's wait
    // for the next request; it no longer reports to `s`.
    watcher_.unwatch();
  }

 private:
  upstream::exchange_state& s_;
  client_watcher& watcher_;
  bool closed_ = false;
};

// A resumed stream no attempt could continue: its end, in the client's
// dialect, after what it has (its head went long ago).
net::awaitable<bool> end_resumed_stream(any_stream& client, request_context& ctx,
                                        request_error why) {
  ctx.upstream_failed_midstream = true;
  ctx.error = why;
  auto tail = stream::make_error_event(ctx.dialect, "upstream_error", why.code, why.message);
  stream::chunk_line line;
  auto chunk = stream::as_chunk(tail, line);
  std::vector<net::const_buffer> pieces(chunk.begin(), chunk.end());
  pieces.push_back(stream::last_chunk);
  client.expires_after(std::chrono::seconds(10));
  auto [ec, n] = co_await write_all(client, pieces);
  client.expires_never();
  ctx.bytes_to_client += n;
  co_return !ec;
}

// An error of tokengate's own, as the client's API shapes it: Anthropic's
// body for /v1/messages (its SDK maps the type to its error classes), with
// the plan's headers (a budgeted key's x-ratelimit-* too).
error_extras extras_for(const request_context& ctx, const upstream::exchange_plan& plan,
                        const request_error& e) {
  error_extras extras{plan.response_headers, {}};
  if (ctx.dialect == dialect::anthropic_messages)
    extras.anthropic_type = translate::anthropic_type_for_status(e.status);
  return extras;
}

// No answer to relay: the error as the client's answer, or, for a stream
// being resumed (its head long sent), as its last event.
net::awaitable<bool> answer_failure(any_stream& client, request_context& ctx,
                                    const upstream::exchange_plan& plan, resumption& resume,
                                    request_error failure, bool keep_client) {
  if (resume.stream()) {
    resume.failed();
    bool kept = co_await end_resumed_stream(client, ctx, std::move(failure));
    co_return kept;
  }
  auto extras = extras_for(ctx, plan, failure);
  co_await send_error(client, std::move(failure), keep_client, ctx, extras);
  co_return keep_client;
}

// A stream being resumed goes on only from an answer that continues it.
std::optional<request_error> cannot_continue(const resumption& resume,
                                             const upstream::answer& got) {
  if (!resume.stream() || resume.continues(got)) return std::nullopt;
  return request_error::upstream(502, "upstream_error",
                                 "upstream '" + got.settings->name +
                                     "' could not continue the stream (it answered " +
                                     std::to_string(got.head.status) + ")");
}

// Whether the client connection may carry another request once the
// exchange is over; a client that left is counted (the watcher already
// closed the upstream).
bool keeps_client(worker& w, request_context& ctx, bool keep_client) {
  if (!ctx.client_gone) return keep_client;
  w.metrics().downstream_rq_client_cancelled.add();
  if (!ctx.error) ctx.error = request_error::disconnected();
  return false;
}

}  // namespace

net::awaitable<bool> proxy_exchange(any_stream& client, client_watcher& watcher,
                                    client_request& request, worker& w,
                                    upstream::exchange_plan& plan, request_context& ctx) {
  upstream::exchange_state s(client, ctx);
  bool keep_client = request.head.keep_alive();
  // The watcher's read runs without a deadline; writes get their own.
  client.expires_never();
  // The watcher runs beside the exchange rather than through an awaitable
  // operator: a parallel group connects a cancellation slot to every
  // operation inside it, and installing and clearing those cost about 3 %
  // of the relay's CPU (perf, 9,000 slow streams). Nothing here needs that
  // cancellation.
  watcher.watch(s);
  exchange_end end(s, watcher);
  // An answer from some upstream relayed, or the last failure written. (In
  // this coroutine, not one of its own: each is a frame per request.) An
  // answer the relay gave up before its first token hands over to the
  // next target; a stream left suspended mid-answer is resumed from a new
  // attempt, the same target first.
  upstream::answer got;
  resumption resume(w, s, plan);
  for (std::size_t from = 0;;) {
    resume.before_attempt(request, from);
    auto failure =
        co_await upstream::open_answer(s, request, plan, w.upstreams(), w.metrics(), got, from);
    if (!ctx.client_gone && !failure && resume.prefill_refused(got)) continue;
    auto* translator = failure ? nullptr : resume.translator_for(got);
    if (!ctx.client_gone && !failure) failure = cannot_continue(resume, got);
    if (ctx.client_gone) break;
    if (failure) {
      s.finished = true;
      keep_client =
          co_await answer_failure(client, ctx, plan, resume, std::move(*failure), keep_client);
      break;
    }
    s.abandoned.reset();
    {
      upstream::in_flight streaming(*got.in_flight);
      const stream::relay_env env{w.config().limits, w.metrics(), w.latency(), w.realtime()};
      keep_client = co_await stream::relay_response(
          s, got, plan, env, keep_client, request.head.version, translator, resume.stream());
    }
    if (ctx.client_gone) break;
    auto next = resume.next_attempt(got);
    if (!next) break;
    from = *next;
    keep_client = request.head.keep_alive();  // (the relay given up said false)
    if (from < plan.upstreams.size()) continue;
    s.finished = true;  // (given up before its first token, with no target left)
    auto extras = extras_for(ctx, plan, *s.abandoned);
    co_await send_error(client, std::move(*s.abandoned), keep_client, ctx, extras);
    break;
  }
  end.close();
  co_return keeps_client(w, ctx, keep_client);
}

}  // namespace tokengate
