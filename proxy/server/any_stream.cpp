#include "server/any_stream.hpp"
#include "server/plain_syscalls.hpp"

#include <boost/asio/ssl/error.hpp>
#include <boost/beast/http/error.hpp>

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>

namespace tokengate {

net::awaitable<void> any_stream::graceful_close() {
  if (tls_) {
    expires_after(std::chrono::seconds(2));
    co_await tls_->async_shutdown(use_tuple);
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
  if (!tls_) socket().shutdown(tcp::socket::shutdown_send, ignored);
  // What is read is dropped, so every lingering connection of a thread can
  // share one buffer.
  static thread_local std::array<char, 16384> dropped;
  for (;;) {
    auto [ec, n] = co_await async_read_some(net::buffer(dropped), use_tuple);
    if (ec) break;
  }
  close();
}

std::size_t any_stream::send_now(std::span<const net::const_buffer> buffers, error_code& ec) {
  ec = {};
  if (tls_ || !plain_->is_open()) return 0;
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
  if (errno != EAGAIN && errno != EWOULDBLOCK) ec = error_code(errno, boost::system::system_category());
  return 0;
}

bool is_disconnect(const error_code& ec) {
  return ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == net::error::operation_aborted ||
         ec == net::error::bad_descriptor || ec == net::ssl::error::stream_truncated ||
         ec == http::error::end_of_stream || ec == beast::error::timeout;
}

}  // namespace tokengate
