#include "io/any_stream.hpp"

#include <openssl/err.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/http/error.hpp>
#include <cerrno>
#include <vector>

#include "io/plain_syscalls.hpp"
#include "io/write_all.hpp"

namespace tokengate {

net::awaitable<void> any_stream::graceful_close() {
  if (direct_) {
    // close_notify, without waiting for the peer's (nginx does not wait
    // either): the socket takes it at once unless the client stopped reading.
    expires_after(std::chrono::seconds(2));
    auto r = tls_direct::shutdown(direct_->ssl);
    if (r.wait == tls_direct::wait_for::writable) {
      auto [ec] = co_await socket().async_wait(tcp::socket::wait_write, use_tuple);
      if (!ec) tls_direct::shutdown(direct_->ssl);
    }
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_send, ignored);
  }
  // (Plain TCP: close() sends the FIN itself. No descriptor of ours is
  // shared, so a shutdown before it would be a syscall that adds nothing;
  // with bytes unread, both end in a reset alike.)
  close();
}

net::awaitable<void> any_stream::lingering_close(std::chrono::milliseconds linger) {
  expires_after(linger);
  error_code ignored;
  if (plain_) socket().shutdown(tcp::socket::shutdown_send, ignored);
  // What is read is dropped, so every lingering connection of a thread can
  // share one buffer.
  static thread_local std::array<char, 16384> dropped;
  for (;;) {
    auto [ec, n] = co_await async_read_some(net::buffer(dropped), use_tuple);
    if (ec) break;
  }
  close();
}

any_stream::any_stream(tcp::socket socket, std::shared_ptr<net::ssl::context> context,
                       tls_role role)
    : context_(std::move(context)),
      direct_(std::make_unique<direct_tls>(std::move(socket))),
      deadline_(direct_->socket.get_executor(), closer()),
      reactor_(direct_->socket) {
  direct_->ssl =
      tls_direct::attach(context_->native_handle(), direct_->socket, role == tls_role::server);
  if (!direct_->ssl)
    throw boost::system::system_error(static_cast<int>(ERR_get_error()),
                                      net::error::get_ssl_category(), "TLS");
}

net::awaitable<error_code> any_stream::tls_handshake() {
  // (Tried as the socket becomes ready, as the other TLS operations are.)
  auto [ec, none] =
      co_await net::async_initiate<decltype(use_tuple), void(error_code, std::size_t)>(
          [this](auto handler) {
            deadline_aware_handler<decltype(handler)> done{std::move(handler),
                                                           deadline_.expired_flag()};
            start_direct([this] { return tls_direct::handshake(direct_->ssl); }, std::move(done),
                         false);
          },
          use_tuple);
  if (!ec) try_next_read_at_once(socket());
  co_return ec;
}

std::size_t any_stream::send_now(std::span<const net::const_buffer> buffers, error_code& ec) {
  ec = {};
  if (direct_) return send_now_tls(buffers, ec);
  if (!plain_ || !plain_->is_open()) return 0;
  constexpr std::size_t max_pieces = 64;
  iovec pieces[max_pieces];
  std::size_t count = 0, bytes = 0;
  for (; count < std::min(buffers.size(), max_pieces) && bytes < send_now_limit; ++count) {
    auto size = std::min(buffers[count].size(), send_now_limit - bytes);
    pieces[count] = iovec{const_cast<void*>(buffers[count].data()), size};
    bytes += size;
  }
  msghdr message{};
  message.msg_iov = pieces;
  message.msg_iovlen = count;
  ssize_t sent;
  do sent = sendmsg_plain(plain_->native_handle(), &message, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  if (sent >= 0) return static_cast<std::size_t>(sent);
  if (errno != EAGAIN && errno != EWOULDBLOCK)
    ec = error_code(errno, boost::system::system_category());
  return 0;
}

// A record at a time, each call starting where the last one's bytes ended,
// until the socket would block (the record OpenSSL holds then is sent by
// the caller's asynchronous write, which starts with the same bytes).
std::size_t any_stream::send_now_tls(std::span<const net::const_buffer> buffers, error_code& ec) {
  std::size_t sent = 0;
  std::vector<net::const_buffer> rest;
  auto total = net::buffer_size(buffers);
  while (sent < total && sent < send_now_limit) {
    auto pieces = buffers;
    if (sent > 0) {
      unsent_part(buffers, sent, rest);
      pieces = rest;
    }
    auto r = tls_direct::write(direct_->ssl, pieces);
    if (r.bytes == 0) {
      ec = r.ec;
      break;
    }
    sent += r.bytes;
  }
  return sent;
}

bool is_disconnect(const error_code& ec) {
  return ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == net::error::operation_aborted ||
         ec == net::error::bad_descriptor || ec == net::ssl::error::stream_truncated ||
         ec == http::error::end_of_stream || ec == beast::error::timeout;
}

}  // namespace tokengate
