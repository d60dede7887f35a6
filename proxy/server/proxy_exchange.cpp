#include "server/proxy_exchange.hpp"

#include "http/json_response.hpp"
#include "io/write_all.hpp"
#include "server/worker.hpp"
#include "stream/client_framing.hpp"
#include "stream/error_event.hpp"
#include "stream/relay.hpp"
#include "stream/resume_splice.hpp"
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

// The dialect an attempt's target answers in.
dialect answers_in(const upstream::exchange_plan& plan, const upstream::answer& got,
                   const request_context& ctx) {
  if (got.attempt >= plan.translations.size() || !plan.translations[got.attempt])
    return ctx.dialect;
  return plan.translations[got.attempt]->answers_in;
}

// Whether an answer can continue a client's event stream: a 200 event
// stream (a 5xx that ended a resume's attempts cannot), in the dialect
// the stream was read in so far.
bool continues_a_stream(const upstream::answer& got, const upstream::exchange_plan& plan,
                        const request_context& ctx, const stream::answer_translator& kept) {
  return got.head.status == 200 &&
         got.head.value_of(known_field::content_type).starts_with("text/event-stream") &&
         kept.upstream_dialect() == answers_in(plan, got, ctx);
}

// The translation an attempt's answer goes through. A resumed stream keeps
// its own (a translator goes on where it was); a stream in the client's
// API is resumed through a splice that keeps the client's names.
std::unique_ptr<stream::answer_translator> translator_for_attempt(
    const upstream::exchange_plan& plan, const upstream::answer& got, const request_context& ctx,
    upstream::suspended_stream* resumed, std::unique_ptr<stream::answer_translator> kept) {
  if (!resumed) return translator_for(plan, got, ctx);
  if (!kept)
    kept = std::make_unique<stream::resume_splice>(ctx.dialect, std::move(resumed->identity),
                                                   ctx.usage_injected);
  kept->on_resumed();
  return kept;
}

void count_resume(worker& w, const request_context& ctx, const upstream::suspended_stream& why,
                  std::string_view result) {
  w.metrics().resumes.add({ctx.route, "restart", std::string(why.reason), std::string(result)});
}

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

// No answer to relay: the error as the client's answer, or, for a stream
// being resumed (its head long sent), as its last event.
net::awaitable<bool> answer_failure(worker& w, any_stream& client, request_context& ctx,
                                    const upstream::exchange_plan& plan,
                                    const upstream::suspended_stream* resumed,
                                    request_error failure, bool keep_client) {
  if (resumed) {
    count_resume(w, ctx, *resumed, "failed");
    bool kept = co_await end_resumed_stream(client, ctx, std::move(failure));
    co_return kept;
  }
  // (with the plan's own headers: a budgeted key's x-ratelimit-* too)
  co_await send_error(client, std::move(failure), keep_client, ctx,
                      error_extras{plan.response_headers, {}});
  co_return keep_client;
}

// After a relay: the attempt to open next, if any. A stream left
// suspended mid-answer is resumed, the same target first (its retries
// apply); an answer given up before its first token hands over to the
// next target. A resumed stream's end is counted.
std::optional<std::size_t> next_attempt(worker& w, upstream::exchange_state& s,
                                        const upstream::answer& got,
                                        std::unique_ptr<upstream::suspended_stream>& resumed) {
  auto& ctx = s.ctx;
  if (resumed)
    count_resume(w, ctx, *resumed,
                 s.suspended                                         ? "failed"
                 : ctx.error && ctx.error->code == "resume_diverged" ? "diverged"
                 : ctx.upstream_failed_midstream                     ? "failed"
                                                                     : "completed");
  if (s.suspended) {
    resumed = std::move(s.suspended);
    --s.resumes_left;
    ++ctx.resumes;
    if (ctx.resumed_at_token == 0) ctx.resumed_at_token = ctx.content_events;
    return got.attempt;
  }
  if (s.abandoned) return got.attempt + 1;
  return std::nullopt;
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
  s.resumes_left = plan.resume.mode == config::resume_mode::off ? 0 : plan.resume.max_resumes;
  std::unique_ptr<upstream::suspended_stream> resumed;
  std::unique_ptr<stream::answer_translator> translator;
  for (std::size_t from = 0;;) {
    auto failure =
        co_await upstream::open_answer(s, request, plan, w.upstreams(), w.metrics(), got, from);
    translator = failure
                     ? nullptr
                     : translator_for_attempt(plan, got, ctx, resumed.get(), std::move(translator));
    if (!ctx.client_gone && !failure && resumed && !continues_a_stream(got, plan, ctx, *translator))
      failure = request_error::upstream(502, "upstream_error",
                                        "upstream '" + got.settings->name +
                                            "' could not continue the stream (it answered " +
                                            std::to_string(got.head.status) + ")");
    if (ctx.client_gone) break;
    if (failure) {
      s.finished = true;
      keep_client = co_await answer_failure(w, client, ctx, plan, resumed.get(),
                                            std::move(*failure), keep_client);
      break;
    }
    s.abandoned.reset();
    {
      upstream::in_flight streaming(*got.in_flight);
      const stream::relay_env env{w.config().limits, w.metrics(), w.latency(), w.realtime()};
      keep_client = co_await stream::relay_response(
          s, got, plan, env, keep_client, request.head.version, translator.get(), resumed.get());
    }
    if (ctx.client_gone) break;
    auto next = next_attempt(w, s, got, resumed);
    if (!next) break;
    from = *next;
    keep_client = request.head.keep_alive();  // (the relay given up said false)
    if (from < plan.upstreams.size()) continue;
    s.finished = true;  // (given up before its first token, with no target left)
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
