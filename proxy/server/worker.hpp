#pragma once
// One worker thread: its own io_context, its own listening sockets (the
// kernel spreads connections over workers with SO_REUSEPORT), its own
// upstream pools and metric shard. Nothing here is shared between threads
// except the read-only config snapshot and the atomics in the metric shard.
#include <boost/asio/ssl/context.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <unordered_set>
#include <vector>

#include "config/config.hpp"
#include "metrics/counters.hpp"
#include "net.hpp"
#include "upstream/pool.hpp"

namespace tokengate {

class any_stream;

struct bound_listener {
  const config::listener* settings;
  std::shared_ptr<net::ssl::context> tls;  // null for plain HTTP
  std::unique_ptr<tcp::acceptor> acceptor;
};

class worker {
 public:
  worker(int index, std::shared_ptr<const config::config> config);
  ~worker();

  int index() const { return index_; }
  net::io_context& io() { return io_; }
  const config::config& config() const { return *config_; }
  metrics::shard& metrics() { return metrics_; }
  const metrics::shard& metrics() const { return metrics_; }
  upstream::pool& pool_for(const std::string& upstream_name);

  // Binds a listener; with port 0 the first worker picks the port and the
  // others pass it here so every worker listens on the same one.
  std::uint16_t bind(const config::listener& settings, std::uint16_t port,
                     std::shared_ptr<net::ssl::context> tls);
  void start_accepting();

  // Stop accepting, close idle keep-alive connections; requests in flight
  // finish and then close their connection. Called on this worker's thread.
  void begin_drain();
  bool draining() const { return draining_.load(std::memory_order_relaxed); }

  // Keep-alive connections waiting for their next request, so that a drain
  // can close them at once.
  void mark_idle(any_stream* stream) { idle_.insert(stream); }
  void mark_busy(any_stream* stream) { idle_.erase(stream); }

 private:
  net::awaitable<void> accept_loop(bound_listener& l);

  int index_;
  net::io_context io_{1};  // one thread: Asio may skip its internal locking
  std::shared_ptr<const config::config> config_;
  metrics::shard metrics_;
  std::vector<bound_listener> listeners_;
  std::map<std::string, std::unique_ptr<upstream::pool>> pools_;
  std::shared_ptr<net::ssl::context> upstream_tls_;  // default trust store
  std::map<std::string, std::shared_ptr<net::ssl::context>> upstream_tls_by_ca_;
  std::unordered_set<any_stream*> idle_;
  std::atomic<bool> draining_{false};
};

}  // namespace tokengate
