#include "io/accept_now.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/drained_read.hpp"

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

// A descriptor closed when it goes.
struct owned_fd {
  int fd;
  ~owned_fd() {
    if (fd >= 0) ::close(fd);
  }
};

int option_of(int fd, int level, int name) {
  int value = 0;
  socklen_t length = sizeof value;
  return ::getsockopt(fd, level, name, &value, &length) == 0 ? value : -1;
}

bool probe_inheritance() {
  int on = 1;
  owned_fd listener{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener.fd < 0 || ::setsockopt(listener.fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) != 0 ||
      ::setsockopt(listener.fd, IPPROTO_TCP, TCP_INQ, &on, sizeof on) != 0 ||
      ::bind(listener.fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener.fd, 1) != 0 ||
      ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    return false;
  owned_fd client{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (client.fd < 0 ||
      ::connect(client.fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
    return false;
  owned_fd accepted{::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC)};
  return accepted.fd >= 0 && option_of(accepted.fd, IPPROTO_TCP, TCP_NODELAY) == 1 &&
         option_of(accepted.fd, IPPROTO_TCP, TCP_INQ) == 1;
}

}  // namespace

bool accepted_sockets_inherit_options() {
  static const bool inherited = probe_inheritance();
  return inherited;
}

std::optional<tcp::socket> accept_now(tcp::acceptor& acceptor, tcp::endpoint& peer,
                                      error_code& ec) {
  ec = {};
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  int fd;
  do
    fd = ::accept4(acceptor.native_handle(), reinterpret_cast<sockaddr*>(&address), &length,
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
