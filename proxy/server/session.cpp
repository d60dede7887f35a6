#include "server/session.hpp"

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "http/json_response.hpp"
#include "http/read_message.hpp"
#include "http/request_context.hpp"
#include "io/any_stream.hpp"
#include "io/client_watcher.hpp"
#include "scan/hex.hpp"
#include "server/body_pool.hpp"
#include "server/connection_gate.hpp"
#include "server/dispatch.hpp"
#include "server/early_forward.hpp"
#include "server/request_record.hpp"
#include "server/worker.hpp"

namespace tokengate {
namespace {

// The client's own id is kept when it is short and printable (it ends up in
// logs); otherwise we make one.
std::string request_id_for(std::string_view given) {
  bool usable = !given.empty() && given.size() <= 128;
  for (char c : given) usable = usable && c > 0x20 && c < 0x7f && c != '"' && c != '\\';
  if (usable) return std::string(given);
  return random_hex_128();
}

// Waits for the first byte of the next request. While a kept-alive
// connection waits it counts as idle, so a drain can close it. A new
// connection's first request is waited for (head_timeout) even in a
// drain: its client connected before the drain, and the connection's
// first read waits for epoll (worker::prepare_accepted), so one accepted
// with its request already sent waits here too. (A client that connects
// and sends nothing holds the drain until head_timeout.)
net::awaitable<bool> wait_for_request(any_stream& stream, beast::flat_buffer& buffer,
                                      client_watcher& watcher, worker& w, bool first) {
  const auto timeout = first ? w.config().limits.head_timeout : w.config().limits.idle_timeout;
  if (watcher.reading()) {  // the last response's watch goes on as this wait
                            // (io/client_watcher.hpp)
    w.mark_idle(&stream);
    stream.expires_after(timeout);
    auto [ec] = co_await watcher.async_wait_read(use_tuple);
    w.mark_busy(&stream);
    if (ec) co_return false;
  }
  if (buffer.size() > 0) co_return true;
  auto into = buffer.prepare(4096);
  error_code ec;
  std::size_t n = 0;
  if (!stream.read_now(into, ec, n)) {  // (a client that sends its next request at once: no wait)
    if (!first) w.mark_idle(&stream);
    stream.expires_after(timeout);
    std::tie(ec, n) = co_await stream.async_read_some(into, use_tuple);
    if (!first) w.mark_busy(&stream);
  }
  if (ec) co_return false;
  buffer.commit(n);
  co_return true;
}

// Maps a parser error on a client request to the answer it deserves, or
// nothing when the client simply went away.
std::optional<request_error> classify_read_error(const error_code& ec,
                                                 const config::limit_settings& limits) {
  if (ec == http::error::header_limit)
    return request_error::client(
        431, "request_header_too_large",
        "request head exceeds " + std::to_string(limits.max_head_bytes) + " bytes");
  if (ec == http::error::body_limit)
    return request_error::client(
        413, "request_too_large",
        "request body exceeds " + std::to_string(limits.max_body_bytes) + " bytes");
  // A head or body that does not arrive in time (slowloris): the stream's
  // deadline has already closed the socket, so the answer is the close.
  if (ec == beast::error::timeout) return std::nullopt;
  if (ec == http::error::end_of_stream || ec == net::error::eof || is_disconnect(ec))
    return std::nullopt;
  return request_error::client(400, "invalid_request", "malformed HTTP request: " + ec.message());
}

// How long a client that was answered before its request was read whole
// may go on sending (any_stream::lingering_close): a 16 MB body refused
// at its head arrives in well under a second here, over 5 s only on links
// below ~30 Mbit/s.
constexpr std::chrono::seconds linger_after_early_answer{5};

// A request that could not be read answered when it deserves an answer;
// returns whether it did (the client may then still be sending).
net::awaitable<bool> answer_read_error(any_stream& stream, const error_code& ec,
                                       const config::limit_settings& limits, request_context& ctx) {
  auto failure = classify_read_error(ec, limits);
  if (!failure) co_return false;
  co_await send_error(stream, std::move(*failure), false, ctx);
  co_return true;
}

// What reading a request came to: nothing when it is ready for dispatch,
// else the connection ends, with whether the client may still be sending.
using read_outcome = std::optional<bool>;

// What a request's head came to: nothing to say (it is read and sound),
// a refusal to answer with, or a close without a word (the client went
// away, or too slow: the deadline closed the socket).
struct head_verdict {
  std::optional<request_error> refusal;
  bool close_silently = false;
};

// The head judged as read, its identity noted in `ctx`.
head_verdict judge_head(const error_code& hec, const request_head& head, request_context& ctx,
                        const config::limit_settings& limits) {
  ctx.received = clock::now();
  // (A refused head's views point into the buffer, and may be part of a field.)
  ctx.request_id =
      request_id_for(hec ? std::string_view() : head.value_of(known_field::x_request_id));
  // (Too many fields, not too many bytes: the parser stopped with the
  // fields full. A head over the byte limit has none parsed.)
  if (hec == http::error::header_limit && head.fields.size() == limits.max_header_count)
    return {request_error::client(
        431, "too_many_headers",
        "too many request headers (limit " + std::to_string(limits.max_header_count) + ")")};
  if (hec) {
    auto failure = classify_read_error(hec, limits);
    return {failure, !failure};
  }
  ctx.method = std::string(head.method_string);
  ctx.path = std::string(head.target.substr(0, head.target.find('?')));
  ctx.dialect = dialect_for_path(ctx.path);
  if (!head.host_fields_allowed())
    return {request_error::client(400, "invalid_host",
                                  head.version >= 11
                                      ? "an HTTP/1.1 request must have exactly one Host header"
                                      : "a request must not have more than one Host header")};
  return {};
}

// The request whole: its head, then its body (forwarded while it arrives
// where it is long, server/early_forward.hpp). (One coroutine for both:
// each awaited sub-coroutine is a frame allocated and entered per request.)
net::awaitable<read_outcome> read_request(any_stream& stream, beast::flat_buffer& buffer,
                                          client_request& request, request_context& ctx, worker& w,
                                          const config::listener& listener, bool may_forward,
                                          std::unique_ptr<early_forward>& early) {
  const auto& limits = w.config().limits;
  auto& head = request.head;
  stream.expires_after(limits.head_timeout);
  auto hec = co_await read_request_head(stream, buffer, head, limits.max_head_bytes,
                                        limits.max_header_count);
  auto verdict = judge_head(hec, head, ctx, limits);
  if (verdict.close_silently) co_return false;
  if (verdict.refusal) {  // (the client may still be sending: a body on its way)
    co_await send_error(stream, std::move(*verdict.refusal), false, ctx);
    co_return true;
  }
  // Its trace, before any of it goes upstream (a long body goes while it arrives).
  if (const auto& tracing = w.config().tracing)
    ctx.trace = begin_trace(head.value_of("traceparent"), head.value_of("tracestate"),
                            tracing->sampling_ratio);
  if (head.expects_continue() && head.has_body()) {
    static constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
    stream.expires_after(limits.body_timeout);
    auto [cec, cn] = co_await net::async_write(stream, net::buffer(continue_line), use_tuple);
    if (cec) co_return false;
  }
  stream.expires_after(limits.body_timeout);
  auto bec = co_await read_body(stream, buffer, request, w, listener, ctx, may_forward, early);
  if (bec) {
    bool answered = co_await answer_read_error(stream, bec, limits, ctx);
    co_return answered;
  }
  ctx.request_read = clock::now();
  co_return std::nullopt;
}

// A request read whole, answered and recorded; returns whether the
// connection may carry another.
net::awaitable<bool> serve_request(any_stream& stream, client_watcher& watcher,
                                   client_request& request, request_context& ctx, worker& w,
                                   const config::listener& listener,
                                   std::unique_ptr<early_forward>& early) {
  w.metrics().downstream_rq_total.add();
  w.metrics().downstream_rq_active.add();
  bool keep_alive = request.head.keep_alive() && !w.draining();
  if (!w.setups().try_start()) {  // a burst: open streams' events first (server/setup_pacer.hpp)
    w.metrics().downstream_rq_paced.add();
    co_await w.setups().wait_turn(net::use_awaitable);
  }
  keep_alive =
      co_await dispatch_request(stream, watcher, request, w, listener, ctx, keep_alive, early);
  w.metrics().downstream_rq_active.sub();
  if (ctx.status) w.metrics().count_status(ctx.status);
  ctx.finished = clock::now();
  record_request(w, ctx);
  co_return keep_alive;
}

// Read whole, answered, closed: a client over its share of connections
// learns why, and the connection is gone as soon as it would have been idle.
net::awaitable<void> refuse_over_client_limit(any_stream& stream, request_context& ctx, worker& w) {
  w.metrics().downstream_cx_refused_per_client.add();
  co_await send_error(
      stream,
      request_error::policy(429, "rate_limit_error", "too_many_connections",
                            "too many connections from your address (limit " +
                                std::to_string(w.config().limits.max_connections_per_client) +
                                "); reuse a keep-alive connection or wait for one to close"),
      false, ctx);
  w.metrics().count_status(429);
}

// Serves requests until the connection is to end; returns whether the
// client may still be sending (answered before its request was read whole).
net::awaitable<bool> serve_requests(any_stream& stream, beast::flat_buffer& buffer,
                                    client_watcher& watcher, worker& w,
                                    const config::listener& listener, bool over_client_limit) {
  bool first = true;
  for (;;) {
    // In a drain a kept-alive connection ends here; a new one's first
    // request is still served: the drain itself takes the connections left
    // in the accept queue (worker::begin_drain), and those just accepted
    // may have theirs on the way.
    if (!first && w.draining()) co_return false;
    if (!co_await wait_for_request(stream, buffer, watcher, w, first)) co_return false;
    first = false;

    request_context ctx;
    client_request request;
    body_given_back keep_body_buffer(w.bodies(), request.body);
    std::unique_ptr<early_forward>
        early;  // (on the heap: most requests have none, and the frame lasts the session)
    auto ended =
        co_await read_request(stream, buffer, request, ctx, w, listener, !over_client_limit, early);
    if (ended) co_return *ended;
    watcher.expect_requests_of(request.head.bytes.size() + request.body.size());
    if (over_client_limit) {
      co_await refuse_over_client_limit(stream, ctx, w);
      co_return false;
    }
    bool keep_alive = co_await serve_request(stream, watcher, request, ctx, w, listener, early);
    if (!keep_alive || w.draining()) co_return false;
  }
}

// serve_requests with the connection's buffer and client watcher, whose
// last read is waited for, whatever the end: it writes into the buffer and
// reports to the watcher.
net::awaitable<bool> session_loop(any_stream& stream, worker& w, const config::listener& listener,
                                  bool over_client_limit) {
  beast::flat_buffer buffer;
  client_watcher watcher(stream, buffer);
  std::exception_ptr failed;
  bool may_still_send = false;
  try {
    may_still_send =
        co_await serve_requests(stream, buffer, watcher, w, listener, over_client_limit);
  } catch (...) {
    failed = std::current_exception();
  }
  if (watcher.reading()) {
    watcher.cancel();
    co_await watcher.async_wait_read(use_tuple);
  }
  if (failed) std::rethrow_exception(failed);
  co_return may_still_send;
}

}  // namespace

net::awaitable<void> run_session(any_stream stream, connection_ticket ticket, worker& w,
                                 const config::listener& listener) {
  w.metrics().downstream_cx_total.add();
  w.metrics().downstream_cx_active.add();
  bool handshake_ok = true;
  if (stream.is_tls()) {
    stream.expires_after(w.config().limits.tls_handshake_timeout);
    auto ec = co_await stream.tls_handshake();
    if (ec) {
      spdlog::debug("TLS handshake on {} failed: {}", listener.name, ec.message());
      handshake_ok = false;
    } else {
      w.metrics().downstream_tls_handshakes.add();
      if (SSL_session_reused(stream.native_tls())) w.metrics().downstream_tls_resumed.add();
    }
  }
  if (handshake_ok) {
    if (co_await session_loop(stream, w, listener, !ticket.within_client_limit()))
      co_await stream.lingering_close(linger_after_early_answer);
    else
      co_await stream.graceful_close();
  } else {
    stream.close();
  }
  w.metrics().downstream_cx_active.sub();
}

}  // namespace tokengate
