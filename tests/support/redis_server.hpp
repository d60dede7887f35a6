#pragma once
// A real redis-server (Debian's, installed by scripts/setup) on a free
// port of 127.0.0.1, for as long as the object lives; stop() and start()
// take it down and bring it back on the same port, as an outage would.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>

namespace tokengate::test {

class redis_server {
 public:
  redis_server() : port_(free_port()) { start(); }
  ~redis_server() { stop(); }
  redis_server(const redis_server&) = delete;

  std::uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }  // (SIGSTOP: a store that stalls)
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  void start() {
    pid_ = ::fork();
    if (pid_ == 0) {
      auto port = std::to_string(port_);
      ::execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
               "--save", "", "--appendonly", "no", "--loglevel", "warning", nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      if (answers()) return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_)
        throw std::runtime_error("redis-server did not start (scripts/setup installs it)");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("redis-server did not listen within 2 s");
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  static std::uint16_t free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), len);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
  }
  bool answers() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port_);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }

  std::uint16_t port_;
  pid_t pid_ = -1;
};

}  // namespace tokengate::test
