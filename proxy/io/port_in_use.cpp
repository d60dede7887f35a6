#include "io/port_in_use.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace tokengate {

bool port_already_listened(const boost::asio::ip::tcp::endpoint& endpoint) {
  if (endpoint.port() == 0) return false;  // an ephemeral port is never shared
  int fd = ::socket(endpoint.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on,
               sizeof on);  // as the listeners: TIME_WAIT is no conflict
  bool taken = ::bind(fd, endpoint.data(), static_cast<socklen_t>(endpoint.size())) != 0 &&
               errno == EADDRINUSE;
  ::close(fd);
  return taken;
}

}  // namespace tokengate
