#include "server/proxy_exchange.hpp"

#include <exception>

#include "http/json_response.hpp"
#include "server/worker.hpp"
#include "stream/relay.hpp"

namespace tokengate {
namespace {

// An answer from some upstream relayed, or the last failure written.
net::awaitable<bool> answer_client(upstream::exchange_state& s, client_request& request, worker& w,
                                   upstream::exchange_plan& plan, bool keep_client) {
  upstream::answer got;
  auto failure = co_await upstream::open_answer(s, request, plan, w.upstreams(), w.metrics(), got);
  if (s.ctx.client_gone) co_return keep_client;  // the watcher already closed the upstream
  if (failure) {
    s.finished = true;
    co_await send_error(s.client, std::move(*failure), keep_client, s.ctx);
    co_return keep_client;
  }
  // Nothing is sent upstream again; the request's head went back with the attempt.
  upstream::in_flight streaming(*got.in_flight);
  const stream::relay_env env{w.config().limits, w.metrics(), w.latency(), w.realtime()};
  keep_client =
      co_await stream::relay_response(s, got, plan, env, keep_client, request.head.version);
  co_return keep_client;
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
  std::exception_ptr failed;
  try {
    keep_client = co_await answer_client(s, request, w, plan, keep_client);
  } catch (...) {
    failed = std::current_exception();
  }
  s.finished = true;
  if (s.upstream) s.upstream->stream.close();  // not returned to the pool: not reusable
  // A read of the watcher's still pending goes on as the session's wait for
  // the next request; it no longer reports to `s`.
  watcher.unwatch();
  if (failed) std::rethrow_exception(failed);
  if (ctx.client_gone) {
    w.metrics().downstream_rq_client_cancelled.add();
    if (!ctx.error) ctx.error = request_error::disconnected();
    co_return false;
  }
  co_return keep_client;
}

}  // namespace tokengate
