#include "server/proxy_exchange.hpp"

#include "http/json_response.hpp"
#include "server/worker.hpp"
#include "stream/relay.hpp"
#include "translate/translation.hpp"

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

// The answer's translator, when the target that answered speaks the
// other API than the client.
std::unique_ptr<stream::answer_translator> translator_for(const upstream::exchange_plan& plan,
                                                          const upstream::answer& got,
                                                          const request_context& ctx) {
  if (got.attempt >= plan.translations.size() || !plan.translations[got.attempt]) return nullptr;
  return translate::answer_translator_for(ctx.dialect, plan.translations[got.attempt]->answers_in,
                                          plan.usage_asked, ctx.model);
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
  // next target.
  upstream::answer got;
  for (std::size_t from = 0;;) {
    auto failure =
        co_await upstream::open_answer(s, request, plan, w.upstreams(), w.metrics(), got, from);
    if (!ctx.client_gone && failure) {
      s.finished = true;
      // (with the plan's own headers: a budgeted key's x-ratelimit-* too)
      co_await send_error(client, std::move(*failure), keep_client, ctx,
                          error_extras{plan.response_headers, {}});
      break;
    }
    if (ctx.client_gone) break;
    s.abandoned.reset();
    {
      upstream::in_flight streaming(*got.in_flight);
      const stream::relay_env env{w.config().limits, w.metrics(), w.latency(), w.realtime()};
      auto translator = translator_for(plan, got, ctx);
      keep_client = co_await stream::relay_response(s, got, plan, env, keep_client,
                                                    request.head.version, translator.get());
    }
    if (!s.abandoned || ctx.client_gone) break;
    from = got.attempt + 1;
    if (from < plan.upstreams.size()) continue;
    s.finished = true;
    keep_client = request.head.keep_alive();
    co_await send_error(client, std::move(*s.abandoned), keep_client, ctx,
                        error_extras{plan.response_headers, {}});
    break;
  }
  end.close();
  if (ctx.client_gone) {  // (the watcher already closed the upstream)
    w.metrics().downstream_rq_client_cancelled.add();
    if (!ctx.error) ctx.error = request_error::disconnected();
    co_return false;
  }
  co_return keep_client;
}

}  // namespace tokengate
