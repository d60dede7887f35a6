#pragma once
// An upstream played by hand in a test, for what the demo engine never
// does: a socket listening on 127.0.0.1 at an ephemeral port, served by one
// thread running `serve(listener)` (which accepts what it wants). The
// destructor shuts the listener down, so a serve still in accept returns.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tokengate::test {

class hand_upstream {
 public:
  explicit hand_upstream(std::function<void(int listener)> serve) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(listener_, backlog) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("hand-played upstream: cannot listen on 127.0.0.1");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, serve = std::move(serve)] { serve(listener_); });
  }
  ~hand_upstream() {
    for (int fd : queued_) ::close(fd);
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  hand_upstream(const hand_upstream&) = delete;

  std::uint16_t port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  // Fills its listen queue with connections of its own (for a `serve`
  // that never accepts): the kernel then drops the SYN of any connection
  // after them, as a host that is down or a firewall would.
  void fill_queue() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port_);
    // backlog + 1 wait unaccepted; the ones after (non-blocking) just wait.
    for (int i = 0; i < backlog + 3; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      queued_.push_back(fd);
    }
  }

 private:
  static constexpr int backlog = 4;
  int listener_ = -1;
  std::vector<int> queued_;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace tokengate::test
