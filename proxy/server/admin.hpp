#pragma once
// The admin listener (loopback by default, its own port): /healthz, /readyz,
// /metrics, /stats, /budgets. It runs on worker 0's io_context; it reads other workers' metric
// shards through their relaxed atomics, never through a lock.
#include <functional>
#include <memory>
#include <string>

#include "io/net.hpp"

namespace tokengate {

struct admin_handlers {
  std::function<bool()> ready;
  std::function<std::string()> metrics_text;
  std::function<std::string()> stats_json;
  std::function<net::awaitable<std::string>()> budgets_json;
  // When set, every path but /healthz and /readyz needs `Authorization: Bearer TOKEN`.
  std::string token;
};

class admin_listener {
 public:
  admin_listener(net::io_context& io, const std::string& address, std::uint16_t port,
                 admin_handlers handlers);
  std::uint16_t port() const { return port_; }
  void start();
  void stop();

 private:
  net::awaitable<void> accept_loop();
  tcp::acceptor acceptor_;
  std::uint16_t port_;
  admin_handlers handlers_;
};

}  // namespace tokengate
