#include "stream/relay.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <spdlog/spdlog.h>

#include "server/any_stream.hpp"
#include "server/headers.hpp"
#include "server/json_error.hpp"
#include "server/request_context.hpp"
#include "server/worker.hpp"
#include "stream/error_event.hpp"
#include "stream/sse_parser.hpp"

namespace tokengate {
namespace {

constexpr auto use_tuple = net::as_tuple(net::use_awaitable);
// Bytes of a pipelined next request we accept while a response is relayed.
constexpr std::size_t max_pipelined_bytes = 64 * 1024;

// Shared by the exchange and the client watcher, which run side by side on
// the same thread for the duration of one request.
struct exchange_state {
  any_stream& client;
  beast::flat_buffer& client_buffer;
  request_context& ctx;
  worker& w;
  std::unique_ptr<upstream::connection> upstream;
  bool finished = false;  // the exchange is over: the watcher must stop
};

// Counts events and timestamps the first one. Later observers (tokens,
// usage, limits) hang off the same callback.
class event_counter final : public stream::sse_sink {
 public:
  explicit event_counter(request_context& ctx) : ctx_(ctx) {}
  void on_event(const stream::sse_event&) override {
    if (ctx_.sse_events++ == 0) ctx_.first_event = clock::now();
  }

 private:
  request_context& ctx_;
};

// Reads from the client while the response is produced. A read that fails
// means the client is gone: close the upstream now, so that the engine stops
// generating and frees its KV cache (on every path: prefill, mid-stream,
// non-streaming). Bytes that arrive are kept for the next request.
net::awaitable<void> watch_client(exchange_state& s) {
  while (!s.finished && s.client_buffer.size() < max_pipelined_bytes) {
    auto [ec, n] = co_await s.client.async_read_some(s.client_buffer.prepare(4096), use_tuple);
    if (s.finished) co_return;
    if (ec) {
      s.ctx.client_gone = true;
      if (s.upstream) s.upstream->stream.close();
      co_return;
    }
    s.client_buffer.commit(n);
  }
}

config::duration until(clock::time_point deadline, config::duration phase_limit) {
  auto left = std::chrono::duration_cast<config::duration>(deadline - clock::now());
  if (left < config::duration(1)) left = config::duration(1);
  return std::min(left, phase_limit);
}

upstream_credentials credentials_for(const config::upstream& u) {
  upstream_credentials c;
  if (u.api_key.empty()) return c;
  c.how = u.kind == config::provider_kind::anthropic ? upstream_credentials::style::x_api_key
                                                      : upstream_credentials::style::bearer;
  c.key = u.api_key;
  return c;
}

// A client write; on failure the client is treated as gone.
template <typename Buffers>
net::awaitable<bool> write_client(exchange_state& s, const Buffers& buffers, config::duration timeout) {
  s.client.tcp().expires_after(timeout);  // only arms the write timer: the watcher's read is pending
  auto [ec, n] = co_await net::async_write(s.client, buffers, use_tuple);
  if (ec) {
    s.ctx.client_gone = true;
    if (s.upstream) s.upstream->stream.close();
    co_return false;
  }
  s.ctx.bytes_to_client += n;
  s.w.metrics().downstream_bytes_sent.add(n);
  co_return true;
}

struct upstream_failure {
  unsigned status;
  const char* code;
  std::string message;
};

upstream_failure describe_upstream_error(const error_code& ec, const config::upstream& u, bool waiting_first_byte) {
  if (ec == beast::error::timeout) {
    if (waiting_first_byte)
      return {504, "upstream_timeout",
              "upstream '" + u.name + "' sent no response within " +
                  std::to_string(u.timeouts.first_byte.count()) + " ms"};
    return {504, "upstream_timeout", "upstream '" + u.name + "' stalled"};
  }
  return {502, "upstream_error", "upstream '" + u.name + "' failed: " + ec.message()};
}

// Relays the upstream response whose head has been read.
net::awaitable<bool> relay_response(exchange_state& s, http::response_parser<http::buffer_body>& parser,
                                    beast::flat_buffer& up_buffer, const config::upstream& settings,
                                    clock::time_point deadline, bool client_keep_alive,
                                    unsigned client_http_version) {
  auto& ctx = s.ctx;
  const auto& limits = s.w.config().limits;
  auto& head = parser.get();
  ctx.upstream_headers = clock::now();
  ctx.streamed = head[http::field::content_type].starts_with("text/event-stream");
  auto content_length = parser.content_length();
  // Without a length the client gets chunked framing; HTTP/1.0 clients get a
  // close-delimited body instead.
  bool chunked = !content_length && client_http_version >= 11;
  if (!content_length && !chunked) client_keep_alive = false;

  http::response<http::empty_body> out{head.result(), 11};
  forward_response_headers(head.base(), out.base(), ctx.request_id);
  if (ctx.streamed) {
    out.set(http::field::cache_control, "no-cache");
    out.set("X-Accel-Buffering", "no");  // tells an nginx in front not to buffer either
  }
  if (content_length) out.content_length(*content_length);
  else if (chunked) out.chunked(true);
  out.keep_alive(client_keep_alive);

  http::response_serializer<http::empty_body> serializer{out};
  s.client.tcp().expires_after(limits.client_write_timeout);
  ctx.status = head.result_int();
  ctx.response_started = true;
  auto [hec, hn] = co_await http::async_write_header(s.client, serializer, use_tuple);
  if (hec) {
    ctx.client_gone = true;
    co_return false;
  }
  ctx.bytes_to_client += hn;

  stream::sse_parser sse;
  event_counter counter(ctx);
  auto buffer = std::make_unique<char[]>(limits.stream_buffer_bytes);
  error_code failure;
  while (!parser.is_done()) {
    parser.get().body().data = buffer.get();
    parser.get().body().size = limits.stream_buffer_bytes;
    s.upstream->stream.tcp().expires_after(until(deadline, settings.timeouts.idle));
    auto [ec, n] = co_await http::async_read_some(s.upstream->stream, up_buffer, parser, use_tuple);
    if (ec == http::error::need_buffer) ec = {};
    std::size_t got = limits.stream_buffer_bytes - parser.get().body().size;
    if (got > 0) {
      // Forward first, observe second: the observer never delays a byte.
      net::const_buffer bytes(buffer.get(), got);
      bool ok = false;
      if (chunked) ok = co_await write_client(s, http::make_chunk(bytes), limits.client_write_timeout);
      else ok = co_await write_client(s, bytes, limits.client_write_timeout);
      if (!ok) co_return false;
      if (ctx.streamed) sse.feed(std::string_view(buffer.get(), got), counter);
    }
    if (ctx.client_gone) co_return false;
    if (ec) {
      failure = ec;
      break;
    }
  }
  s.w.metrics().stream_events_total.add(ctx.sse_events);

  if (!failure) {
    if (chunked && !co_await write_client(s, http::make_chunk_last(), limits.client_write_timeout))
      co_return false;
    s.finished = true;  // from here on the watcher must not touch the connection
    if (parser.keep_alive()) s.w.pool_for(settings.name).release(std::move(s.upstream));
    co_return client_keep_alive;
  }

  // The upstream failed after the response began: no retry is possible. An
  // SSE client gets an error event in its dialect and a properly ended body,
  // never a clean end that looks like a complete answer.
  ctx.upstream_failed_midstream = true;
  s.w.metrics().downstream_rq_stream_failed.add();
  if (failure == beast::error::timeout) s.w.metrics().upstream_rq_timeout.add();
  auto reason = describe_upstream_error(failure, settings, false);
  ctx.error = reason.message;
  spdlog::warn("request {}: upstream {} failed mid-stream: {}", ctx.request_id, settings.name, failure.message());
  s.upstream->stream.close();
  if (!ctx.streamed || !chunked) co_return false;  // a cut connection is the only honest signal left

  std::string tail;
  if (sse.inside_line()) tail = "\n\n";          // close the cut line and the cut event
  else if (!sse.at_event_boundary()) tail = "\n"; // close the cut event
  tail += stream::make_error_event(ctx.dialect, "upstream_error",
                                   failure == beast::error::timeout ? "upstream_timeout" : "upstream_disconnected",
                                   reason.message);
  if (!co_await write_client(s, http::make_chunk(net::buffer(tail)), limits.client_write_timeout))
    co_return false;
  if (!co_await write_client(s, http::make_chunk_last(), limits.client_write_timeout)) co_return false;
  co_return client_keep_alive;
}

net::awaitable<void> run_exchange(exchange_state& s, http::request<http::string_body>& request,
                                  const config::listener& listener, bool& keep_client) {
  auto& ctx = s.ctx;
  auto& pool = s.w.pool_for(listener.upstream);
  const auto& settings = pool.settings();
  ctx.upstream = settings.name;
  const auto deadline = ctx.request_read + settings.timeouts.total;
  const bool client_keep_alive = keep_client;

  http::request<http::string_body> up{request.method(), pool.url().upstream_path(request.target()), 11};
  forward_request_headers(request.base(), up.base(), pool.url().host_header, ctx.request_id,
                          credentials_for(settings));
  up.body() = std::move(request.body());
  up.prepare_payload();
  up.keep_alive(true);

  // A pooled connection may have been closed by the upstream while idle; a
  // failure on it before any response byte is retried once on a new one.
  for (int attempt = 0;; ++attempt) {
    // (No ternary between two awaitables: GCC 12 destroys the wrong temporary.)
    upstream::acquire_result acquired;
    if (attempt == 0) acquired = co_await pool.acquire();
    else acquired = co_await pool.connect_new();
    if (!acquired.conn) {
      s.w.metrics().upstream_cx_connect_fail.add();
      if (ctx.client_gone) co_return;
      bool timeout = acquired.failure == upstream::connect_failure::timeout;
      ctx.error = acquired.message;
      spdlog::warn("request {}: {}", ctx.request_id, acquired.message);
      s.finished = true;
      co_await send_json_error(s.client, timeout ? 504 : 502, acquired.message, "upstream_error",
                               timeout ? "upstream_timeout" : "upstream_unavailable", client_keep_alive, ctx);
      co_return;
    }
    s.upstream = std::move(acquired.conn);
    if (s.upstream->reused) s.w.metrics().upstream_cx_reused.add();
    if (ctx.client_gone) {
      s.upstream->stream.close();
      co_return;
    }

    auto& up_stream = s.upstream->stream;
    up_stream.tcp().expires_after(until(deadline, settings.timeouts.first_byte));
    auto [wec, wn] = co_await http::async_write(up_stream, up, use_tuple);
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);  // bodies are relayed, never held
    parser.header_limit(64 * 1024);
    beast::flat_buffer up_buffer;
    error_code ec = wec;
    if (!ec) {
      auto [hec, hn] = co_await http::async_read_header(up_stream, up_buffer, parser, use_tuple);
      ec = hec;
    }
    if (ctx.client_gone) co_return;  // the watcher already closed the upstream
    if (ec) {
      bool stale = s.upstream->reused && attempt == 0 && ec != beast::error::timeout;
      s.upstream->stream.close();
      s.upstream.reset();
      if (stale) continue;
      if (ec == beast::error::timeout) s.w.metrics().upstream_rq_timeout.add();
      auto failure = describe_upstream_error(ec, settings, true);
      ctx.error = failure.message;
      spdlog::warn("request {}: {}", ctx.request_id, failure.message);
      s.finished = true;
      co_await send_json_error(s.client, failure.status, failure.message, "upstream_error",
                               failure.code, client_keep_alive, ctx);
      co_return;
    }
    keep_client = co_await relay_response(s, parser, up_buffer, settings, deadline,
                                          client_keep_alive, request.version());
    co_return;
  }
}

}  // namespace

net::awaitable<bool> proxy_exchange(any_stream& client, beast::flat_buffer& client_buffer,
                                    http::request<http::string_body>& request, worker& w,
                                    const config::listener& listener, request_context& ctx) {
  using namespace net::experimental::awaitable_operators;
  exchange_state s{client, client_buffer, ctx, w};
  bool keep_client = request.keep_alive();
  // The watcher's read runs without a deadline; writes get their own.
  client.tcp().expires_never();
  auto exchange = [&]() -> net::awaitable<void> {
    co_await run_exchange(s, request, listener, keep_client);
    s.finished = true;
    if (s.upstream) s.upstream->stream.close();  // not returned to the pool: not reusable
    // Stop the watcher's pending read; the connection itself stays usable.
    error_code ignored;
    client.tcp().socket().cancel(ignored);
  };
  co_await (exchange() && watch_client(s));
  if (ctx.client_gone) {
    w.metrics().downstream_rq_client_cancelled.add();
    if (ctx.error.empty()) ctx.error = "client disconnected";
    co_return false;
  }
  co_return keep_client;
}

net::awaitable<void> send_json_error(any_stream& client, unsigned status, std::string_view message,
                                     std::string_view type, std::string_view code, bool keep_alive,
                                     request_context& ctx) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, "application/json");
  res.set("x-request-id", ctx.request_id);
  res.body() = json_error_body(message, type, code);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  ctx.status = status;
  ctx.response_started = true;
  client.tcp().expires_after(std::chrono::seconds(10));
  auto [ec, n] = co_await http::async_write(client, res, use_tuple);
  if (ec) ctx.client_gone = true;
  ctx.bytes_to_client += n;
}

}  // namespace tokengate
