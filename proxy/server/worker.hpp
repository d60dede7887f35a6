#pragma once
// One worker thread: its own io_context, its own listening sockets (the
// kernel spreads connections over workers with SO_REUSEPORT), its own
// upstream pools and metric shard. Nothing here is shared between threads
// except the read-only config snapshot and the atomics in the metric shard.
#include <atomic>
#include <boost/asio/ssl/context.hpp>
#include <map>
#include <memory>
#include <unordered_set>
#include <vector>

#include "budget/gate.hpp"
#include "cache/redis_store.hpp"
#include "cache/store.hpp"
#include "config/config.hpp"
#include "fleet/board.hpp"
#include "io/net.hpp"
#include "metrics/counters.hpp"
#include "metrics/latency.hpp"
#include "metrics/realtime_estimate.hpp"
#include "server/body_pool.hpp"
#include "server/setup_pacer.hpp"
#include "server/slow_requests.hpp"
#include "upstream/worker_upstreams.hpp"

namespace tokengate {

class any_stream;
namespace trace {
class exporter;
}
class connection_gate;
class connection_ticket;
class tls_credentials;

// The current config, swapped whole on reload. A request takes a snapshot
// when it starts and keeps it to the end, so a reload never changes a
// request in flight.
class config_store {
 public:
  explicit config_store(std::shared_ptr<const config::config> c) : current_(std::move(c)) {}
  std::shared_ptr<const config::config> snapshot() const {
    return current_.load(std::memory_order_acquire);
  }
  void replace(std::shared_ptr<const config::config> c) {
    current_.store(std::move(c), std::memory_order_release);
  }

 private:
  std::atomic<std::shared_ptr<const config::config>> current_;
};

struct bound_listener {
  const config::listener* settings;
  std::shared_ptr<tls_credentials> tls;  // null for plain HTTP
  std::unique_ptr<tcp::acceptor> acceptor;
  // Accepted sockets come with TCP_NODELAY (and, plain, TCP_INQ) set on
  // the listener (accepted_sockets_inherit_options).
  bool options_inherited = false;
};

class worker {
 public:
  worker(int index, std::shared_ptr<config_store> store, connection_gate& gate,
         budget::budgets& budgets, fleet::board& fleet, cache::store& cache,
         trace::exporter* tracer);
  ~worker();

  int index() const { return index_; }
  net::io_context& io() { return io_; }
  // The config at start-up: listeners and limits (reload does not rebind).
  const config::config& config() const { return *config_; }
  std::shared_ptr<const config::config> snapshot() const { return store_->snapshot(); }
  metrics::shard& metrics() { return metrics_; }
  metrics::latency_shard& latency() { return latency_; }
  const metrics::latency_shard& latency() const { return latency_; }
  metrics::realtime_estimate& realtime() { return realtime_; }
  const metrics::shard& metrics() const { return metrics_; }
  // Pools, passive health and streams in flight per upstream, this worker's own.
  upstream::worker_upstreams& upstreams() { return upstreams_; }
  setup_pacer& setups() { return setups_; }
  // Budgets: this worker's admission, with its own Redis connection.
  budget::gate& budgets() { return budget_gate_; }
  // Every upstream's load and the admission queue, shared by all workers.
  fleet::board& fleet() { return fleet_; }
  trace::exporter* tracer() { return tracer_; }  // null: tracing is off
  // The response cache, shared by all workers (routes with `cache:`).
  cache::store& response_cache() { return cache_; }
  // … its entries in Redis (cache: {store: redis}): this worker's
  // connection to them; null when they are kept in process.
  cache::redis_store* shared_cache() { return shared_cache_.get(); }
  body_pool& bodies() { return bodies_; }
  slow_requests& slowest() { return slowest_; }
  const slow_requests& slowest() const { return slowest_; }

  // Binds a listener; with port 0 the first worker picks the port and the
  // others pass it here so every worker listens on the same one.
  std::uint16_t bind(const config::listener& settings, std::uint16_t port,
                     std::shared_ptr<tls_credentials> tls);
  void start_accepting();

  // Stop accepting, close idle keep-alive connections; requests in flight
  // finish and then close their connection. The connections still waiting
  // in a listener's accept queue are taken first and their first request
  // served: closing the listener would have the kernel reset them. Called
  // on this worker's thread.
  void begin_drain();
  bool draining() const { return draining_.load(std::memory_order_relaxed); }

  // Keep-alive connections waiting for their next request, so that a drain
  // can close them at once.
  void mark_idle(any_stream* stream) { idle_.insert(stream); }
  void mark_busy(any_stream* stream) { idle_.erase(stream); }

 private:
  net::awaitable<void> accept_loop(bound_listener& l);
  // A connection just accepted: its socket options, then (once the
  // connection limits admit it) its session.
  void prepare_accepted(const bound_listener& l, tcp::socket& socket);
  void start_session(bound_listener& l, tcp::socket socket, connection_ticket ticket);
  // A place in the connection limits for a connection just accepted, waiting
  // for one at limits.max_connections; nothing when the listener closed
  // (drain) while it waited.
  net::awaitable<std::optional<connection_ticket>> admit(bound_listener& l,
                                                         const net::ip::address& client);

  int index_;
  // Before io_, so that they outlast it: a session still open when the
  // workers stop is destroyed with io_'s pending operations, and its frame
  // gives its request's body buffer back to bodies_ (counted in metrics_).
  metrics::shard metrics_;
  body_pool bodies_;
  slow_requests slowest_;
  // One thread runs it, and every socket operation of this worker happens
  // on that thread (other threads only post: drain, stop), so the reactor
  // skips its per-socket lock around each read and write; the scheduler
  // keeps its own for those posts.
  net::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  std::shared_ptr<config_store> store_;
  connection_gate& gate_;
  std::shared_ptr<const config::config> config_;
  metrics::latency_shard latency_;
  metrics::realtime_estimate realtime_;
  std::vector<bound_listener> listeners_;
  upstream::worker_upstreams upstreams_{io_.get_executor(), metrics_};
  std::unordered_set<any_stream*> idle_;
  setup_pacer setups_{io_.get_executor(), setup_pacer::default_per_turn};
  budget::gate budget_gate_;
  fleet::board& fleet_;
  cache::store& cache_;
  std::unique_ptr<cache::redis_store> shared_cache_;
  trace::exporter* tracer_;
  std::atomic<bool> draining_{false};
  std::chrono::steady_clock::time_point last_pause_logged_{};  // at max_connections
};

}  // namespace tokengate
