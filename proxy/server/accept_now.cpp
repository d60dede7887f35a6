#include "server/accept_now.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "server/drained_read.hpp"

namespace tokengate {
namespace {

// What Asio would have known had it made the socket non-blocking itself,
// and that the descriptor is not shared (Boost 1.81's socket state, as in
// drained_read.hpp); elsewhere the ordinary call, one ioctl.
void adopt_accepted(tcp::socket& socket) {
#ifdef TOKENGATE_DRAINED_READ
  namespace ops = boost::asio::detail::socket_ops;
  auto& impl = drained_read_detail::socket_access::implementation(socket);
  impl.state_ |= ops::user_set_non_blocking | ops::internal_non_blocking;
  impl.state_ &= ~ops::possible_dup;
#else
  error_code ignored;
  socket.non_blocking(true, ignored);
#endif
}

}  // namespace

std::optional<tcp::socket> accept_now(tcp::acceptor& acceptor, tcp::endpoint& peer, error_code& ec) {
  ec = {};
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  int fd;
  do fd = ::accept4(acceptor.native_handle(), reinterpret_cast<sockaddr*>(&address), &length,
                    SOCK_NONBLOCK | SOCK_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    ec = error_code(errno, boost::system::system_category());  // (EAGAIN: net::error::would_block)
    return std::nullopt;
  }
  std::memcpy(peer.data(), &address, std::min<std::size_t>(length, sizeof address));
  peer.resize(length);
  tcp::socket socket(acceptor.get_executor());
  socket.assign(address.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
  if (ec) {
    ::close(fd);
    return std::nullopt;
  }
  adopt_accepted(socket);
  return socket;
}

}  // namespace tokengate
