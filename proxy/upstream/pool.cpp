#include "upstream/pool.hpp"

#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/beast/core/tcp_stream.hpp>
#include <charconv>

#include "io/drained_read.hpp"
#include "io/tls_direct.hpp"

namespace tokengate::upstream {
namespace {

// An idle keep-alive socket the upstream has closed (or sent stray bytes on)
// must not carry the next request. Where no report of epoll's has been
// taken for it since its last read drained it, it had not, as far as the
// loop knows, and no syscall is spent to ask (nginx likewise knows its idle
// connections from their events). Otherwise a zero-timeout poll tells.
// A close the loop has not taken a report of yet shows as the request's
// failure on a reused connection, which is retried once on a new one
// (stream/relay.cpp), as it was when the close came just after the poll.
bool still_usable(tcp::socket& sock) {
  if (!sock.is_open()) return false;
  if (quiet_since_drained(sock)) return true;
  pollfd p{sock.native_handle(), POLLIN, 0};
  int ready = ::poll(&p, 1, 0);
  if (ready == 0) return true;  // nothing to read: neither EOF nor garbage
  return false;
}

}  // namespace

pool::pool(net::any_io_executor executor, const config::upstream& settings, target_url url,
           std::shared_ptr<net::ssl::context> tls_context, metrics::shard* metrics)
    : executor_(std::move(executor)),
      settings_(settings),
      url_(std::move(url)),
      tls_context_(std::move(tls_context)),
      metrics_(metrics),
      tls_sessions_(tls_context_ ? std::make_shared<latest_session>() : nullptr) {
  error_code not_literal;
  auto address = net::ip::make_address(url_.host, not_literal);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(url_.port.data(), url_.port.data() + url_.port.size(), port);
  if (!not_literal && ec == std::errc{} && end == url_.port.data() + url_.port.size() && port > 0 &&
      port < 65536)
    literal_endpoint_ = tcp::endpoint(address, static_cast<unsigned short>(port));
}

net::awaitable<acquire_result> pool::acquire() {
  while (!idle_.empty()) {
    auto conn = std::move(idle_.back());  // most recently used: least likely to be stale
    idle_.pop_back();
    if (metrics_) metrics_->upstream_cx_idle.sub();
    // (Over TLS, bytes OpenSSL read ahead past the last response, a
    // close_notify say, are not in the socket for the check to see.)
    if (!conn->stream.holds_unread_bytes() && still_usable(conn->stream.socket())) {
      conn->reused = true;
      co_return acquire_result{std::move(conn)};
    }
  }
  co_return co_await connect_new();
}

net::awaitable<std::optional<acquire_result>> pool::connect_tcp(beast::tcp_stream& tcp_stream) {
  acquire_result result;
  error_code cec;
  if (literal_endpoint_) {
    // Asio's resolver runs getaddrinfo on a thread of its own and posts the
    // answer back: for an address that needs no lookup, a cost per new
    // connection (thousands of them when thousands of streams open at once).
    tcp_stream.expires_after(settings_.timeouts.connect);
    auto [ec] = co_await tcp_stream.async_connect(*literal_endpoint_, use_tuple);
    cec = ec;
  } else {
    tcp::resolver resolver(executor_);
    auto [rec, endpoints] = co_await resolver.async_resolve(url_.host, url_.port, use_tuple);
    if (rec) {
      result.failure = connect_failure::resolve;
      result.message = "cannot resolve upstream host " + url_.host + ": " + rec.message();
      co_return result;
    }
    tcp_stream.expires_after(settings_.timeouts.connect);
    auto [ec, ep] = co_await tcp_stream.async_connect(endpoints, use_tuple);
    cec = ec;
  }
  if (!cec) co_return std::nullopt;
  result.failure =
      cec == beast::error::timeout ? connect_failure::timeout : connect_failure::refused;
  result.message = "cannot connect to upstream " + url_.host_header + ": " + cec.message();
  co_return result;
}

net::awaitable<acquire_result> pool::handshake_tls(tcp::socket socket) {
  acquire_result result;
  auto conn = std::make_unique<connection>(
      connection{any_stream(std::move(socket), tls_context_, tls_role::client)});
  SSL* tls = conn->stream.native_tls();
  if (!tls_direct::expect_server(tls, url_.host)) {
    result.failure = connect_failure::tls;
    result.message = "cannot set TLS server name for " + url_.host;
    co_return result;
  }
  resume_from(tls, tls_sessions_);  // (false: a full handshake, as without it)
  conn->stream.expires_after(settings_.timeouts.connect);
  auto hec = co_await conn->stream.tls_handshake();
  if (hec) {
    bool timed_out = hec == beast::error::timeout;
    result.failure = timed_out ? connect_failure::timeout : connect_failure::tls;
    result.message = "TLS handshake with upstream " + url_.host_header +
                     " failed: " + (timed_out ? std::string("timed out") : hec.message());
    co_return result;
  }
  conn->stream.expires_never();
  if (metrics_) {
    metrics_->upstream_tls_handshakes.add();
    if (SSL_session_reused(tls)) metrics_->upstream_tls_resumed.add();
  }
  result.conn = std::move(conn);
  co_return result;
}

net::awaitable<acquire_result> pool::connect_new() {
  beast::tcp_stream tcp_stream(executor_);
  if (auto failed = co_await connect_tcp(tcp_stream)) co_return std::move(*failed);
  tcp_stream.expires_never();
  tcp_stream.socket().set_option(tcp::no_delay(true));
  // The relay's reads skip a wasted recv when the kernel says nothing is
  // queued (io/drained_read.hpp; through TLS, once OpenSSL reads the
  // socket itself: io/tls_direct.hpp); without this they are ordinary reads.
  enable_drained_reads(tcp_stream.socket());
  if (url_.tls) co_return co_await handshake_tls(tcp_stream.release_socket());
  enable_receive_timestamps(tcp_stream.socket());
  acquire_result result;
  result.conn = std::make_unique<connection>(connection{any_stream(tcp_stream.release_socket())});
  co_return result;
}

std::size_t pool::close_stale(std::chrono::steady_clock::time_point now) {
  auto longest = settings_.timeouts.pooled;
  auto dead =
      std::remove_if(idle_.begin(), idle_.end(), [&](const std::unique_ptr<connection>& conn) {
        bool waited_too_long = longest.count() > 0 && now - conn->pooled_at >= longest;
        return waited_too_long || !still_usable(conn->stream.socket());
      });
  auto closed = static_cast<std::size_t>(idle_.end() - dead);
  idle_.erase(dead, idle_.end());  // (destroying a connection closes it)
  if (metrics_) metrics_->upstream_cx_idle.sub(closed);
  return closed;
}

void pool::adopt(const config::upstream& settings) {
  settings_ = settings;
  if (idle_.size() <= settings_.pool_size) return;
  auto excess = idle_.size() - settings_.pool_size;
  // acquire() takes from the back, so the front has idled longest
  idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(excess));
  if (metrics_) metrics_->upstream_cx_idle.sub(excess);
}

void pool::retire() {
  auto keep_none = settings_;
  keep_none.pool_size = 0;
  adopt(keep_none);
}

void pool::release(std::unique_ptr<connection> conn) {
  if (!conn || idle_.size() >= settings_.pool_size) return;  // dropping it closes it
  conn->stream.expires_never();
  conn->pooled_at = std::chrono::steady_clock::now();
  idle_.push_back(std::move(conn));
  if (metrics_) metrics_->upstream_cx_idle.add();
}

}  // namespace tokengate::upstream
