#pragma once
// A stand-in OTLP/HTTP collector on 127.0.0.1: it keeps each export
// request's body and answers with the status it is told to (200 by
// default). One connection at a time, each closed after its answer, as
// the exporter uses them.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tokengate::test {

class fake_collector {
 public:
  fake_collector() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("fake collector: cannot listen");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_collector() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);  // (accept returns; the descriptor closes once nothing uses it)
    thread_.join();
    ::close(fd_);
  }

  std::uint16_t port() const { return port_; }
  void answer_with(int status) { status_ = status; }
  std::size_t requests() const { return requests_; }

  // Every span received so far, each with its resource's attributes
  // under "resource".
  std::vector<boost::json::object> spans() const {
    std::lock_guard lock(mutex_);
    std::vector<boost::json::object> out;
    for (const auto& body : bodies_) {
      auto request = boost::json::parse(body).as_object();
      for (const auto& rs : request.at("resourceSpans").as_array())
        for (const auto& ss : rs.at("scopeSpans").as_array())
          for (const auto& s : ss.at("spans").as_array()) {
            auto span = s.as_object();
            span["resource"] = rs.at("resource");
            out.push_back(std::move(span));
          }
    }
    return out;
  }
  std::vector<std::string> heads() const {
    std::lock_guard lock(mutex_);
    return heads_;
  }

 private:
  void serve() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string in;
      char buf[65536];
      std::size_t head_end = std::string::npos, length = 0;
      for (;;) {
        auto n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<std::size_t>(n));
        if (head_end == std::string::npos &&
            (head_end = in.find("\r\n\r\n")) != std::string::npos) {
          auto at = in.find("Content-Length: ");
          if (at != std::string::npos && at < head_end) length = std::stoul(in.substr(at + 16));
        }
        if (head_end != std::string::npos && in.size() >= head_end + 4 + length) break;
      }
      ++requests_;
      int status = status_;
      if (head_end != std::string::npos && status == 200) {
        std::lock_guard lock(mutex_);
        heads_.push_back(in.substr(0, head_end));
        bodies_.push_back(in.substr(head_end + 4, length));
      }
      std::string answer = "HTTP/1.1 " + std::to_string(status) +
                           " X\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
      ::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> status_{200};
  std::atomic<std::size_t> requests_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> bodies_, heads_;
  std::thread thread_;
};

}  // namespace tokengate::test
