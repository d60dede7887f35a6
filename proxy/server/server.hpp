#pragma once
// The proxy process: worker threads, their listeners, the admin listener and
// graceful drain. Used by `tokengate serve` and by the integration tests
// (real sockets on 127.0.0.1, port 0).
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "server/status_snapshot.hpp"

namespace tokengate {

class worker;
class admin_listener;
class config_store;
class tls_credentials;
class connection_gate;
namespace budget {
class budgets;
}
namespace fleet {
class board;
class index_sharing;
class prober;
}  // namespace fleet
namespace trace {
class exporter;
}
namespace cache {
class store;
}

class server {
 public:
  explicit server(std::shared_ptr<const config::config> config);
  ~server();

  // Binds every listener (throws on a bad address, busy port or bad
  // certificate) and starts the worker threads.
  void start();

  std::uint16_t port(const std::string& listener_name) const;
  std::uint16_t admin_port() const;
  std::size_t worker_count() const { return workers_.size(); }
  std::size_t max_connections() const;  // limits.max_connections, or its default
  std::string metrics_text() const;
  // /stats (docs/operations.md): per route p50/p95/p99/max over the last
  // minute, five minutes and since start, and their counts; the replicas,
  // the upstreams, the slowest recent requests and the process.
  std::string stats_json() const;

  // Swaps in a new policy (already validated). Requests in flight keep the
  // one they started with. Throws config_error, and the running policy
  // stays, when `next` would leave a listener bound at start without an
  // upstream. Returns what of `next` differs from the start-up config but
  // waits for a restart (config/reload.hpp), for the caller to say.
  std::vector<std::string> reload(std::shared_ptr<const config::config> next);
  std::shared_ptr<const config::config> current_config() const;
  std::uint64_t reloads_ok() const { return reloads_ok_; }
  std::uint64_t reloads_failed() const { return reloads_failed_; }
  // A reload refused before reload() took it (a file that did not
  // validate), with the reason: counted, and shown on the status page.
  void count_failed_reload(std::string why);

  // Reads every TLS listener's certificate and key again (all of them, or
  // only those whose files changed since the last attempt). New handshakes
  // use what loaded; a listener whose files fail keeps its certificate, and
  // the failure is logged and counted. Returns the number that failed.
  std::size_t reload_certificates(bool only_changed);

  // Gives freed heap memory back to the system after a burst of connections
  // has ended (at least 1,000 more were open than now, and now at most a
  // sixteenth of them, at two calls in a row). glibc keeps what a burst
  // freed resident otherwise: 9,000 slow streams left 250 MB resident after
  // they closed; malloc_trim brought it to 67 MB. mimalloc, the release
  // binary's allocator, gives pages back itself a second after they were
  // freed, but only while the heap is in use (allocator.hpp); here each
  // worker's heap is also collected on its own thread, and again at the
  // three calls after while no new burst has begun. Called once a second by
  // `serve`; returns whether it trimmed.
  bool release_memory_after_burst();

  // Each worker frees the long bodies' buffers it kept that have waited
  // their time (server/body_pool.hpp), on its own thread. Called once a
  // second by `serve`.
  void release_unused_body_buffers();

  // Each worker closes the pooled upstream connections that their upstream
  // has closed while they waited, or that have waited longer than their
  // upstream's timeouts.pooled (upstream/pool.hpp), on its own thread.
  // Called once a second by `serve`. The `_now` form returns once every
  // worker has swept (what a test waits for).
  void close_stale_pooled_connections();
  void close_stale_pooled_connections_now();

  // Stops accepting, lets requests in flight finish until the drain
  // deadline, then stops the workers. Blocks until done.
  void drain_and_stop();

 private:
  bool collect_each_heap();  // give_back_free_memory() on each worker's thread, and here
  std::string own_metrics_text() const;  // (metrics_text's last families)
  void share_the_fleet_index();

  std::shared_ptr<const config::config> config_;
  std::shared_ptr<config_store> store_;
  std::unique_ptr<connection_gate> gate_;     // before workers_: they hold a reference
  std::unique_ptr<budget::budgets> budgets_;  // (the same)
  std::unique_ptr<fleet::board> fleet_;       // (the same)
  std::unique_ptr<cache::store> cache_;       // (the same)
  std::unique_ptr<fleet::prober> prober_;
  std::unique_ptr<trace::exporter> tracer_;  // (the same; null without `tracing`)
  std::atomic<std::uint64_t> reloads_ok_{0}, reloads_failed_{0};
  mutable std::mutex reload_note_mutex_;  // (reloads come from serve's thread)
  reload_note last_reload_;
  std::chrono::system_clock::time_point started_ = std::chrono::system_clock::now();
  std::vector<std::unique_ptr<worker>> workers_;
  std::vector<std::thread> threads_;
  std::unique_ptr<admin_listener> admin_;
  // With `redis:` and a balance: fastest route: what the other instances
  // sent each replica (on the first worker's thread).
  std::unique_ptr<fleet::index_sharing> sharing_;
  std::map<std::string, std::uint16_t> ports_;
  std::map<std::string, std::shared_ptr<tls_credentials>> certificates_;  // by listener name
  std::atomic<std::uint64_t> tls_reloads_ok_{0}, tls_reloads_failed_{0};
  int quiet_checks_ = 0;        // calls in a row that found the burst over
  int collects_to_repeat_ = 0;  // after a collect: see release_memory_after_burst
  bool stopped_ = false;
};

}  // namespace tokengate
