#pragma once
// The admin listener (loopback by default, its own port): /healthz, /readyz,
// /metrics, /stats, /stats/stream, /budgets, and the status page at /. It
// runs on worker 0's io_context; it reads other workers' metric shards
// through their relaxed atomics, never through a lock.
#include <atomic>
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
  // When set, every path but /healthz, /readyz and the status page's own
  // files needs `Authorization: Bearer TOKEN`.
  std::string token;
};

class admin_listener {
 public:
  // /stats/stream feeds open at once; one more is answered 503.
  static constexpr std::size_t max_feeds = 16;

  admin_listener(net::io_context& io, const std::string& address, std::uint16_t port,
                 admin_handlers handlers);
  std::uint16_t port() const { return port_; }
  std::size_t open_feeds() const { return feeds_->load(std::memory_order_relaxed); }
  void start();
  void stop();

 private:
  net::awaitable<void> accept_loop();
  tcp::acceptor acceptor_;
  std::uint16_t port_;
  admin_handlers handlers_;
  // (Shared with the sessions: a feed still open when the listener goes
  // ends with its io_context, after it.)
  std::shared_ptr<std::atomic<std::size_t>> feeds_ = std::make_shared<std::atomic<std::size_t>>(0);
};

}  // namespace tokengate
