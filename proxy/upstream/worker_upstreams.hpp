#pragma once
// One worker's view of every upstream: its keep-alive connection pools,
// what its own traffic taught it of their health, and the streams it has
// in flight to each. Used only on the worker's thread: no locks.
#include <boost/asio/ssl/context.hpp>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "config/config.hpp"
#include "io/net.hpp"
#include "metrics/counters.hpp"
#include "upstream/health.hpp"
#include "upstream/pool.hpp"
#include "upstream/retry_policy.hpp"

namespace tokengate::upstream {

class worker_upstreams {
 public:
  worker_upstreams(net::any_io_executor executor, metrics::shard& metrics)
      : executor_(executor), metrics_(metrics) {}

  // The pool for an upstream as the given config describes it; a reload
  // that changes its address gets a new pool. Throws on a bad URL or CA
  // file (at start-up: every upstream's pool is made then).
  pool& pool_for(const config::upstream& settings);
  // After a reload: each pool the new config keeps takes its upstream's new
  // settings (pool::adopt); the pools of upstreams it dropped or moved keep
  // no connection any more (pool::retire).
  void adopt_settings(const config::config& next);
  // Every pool's idle connections that their upstream closed or that have
  // waited their longest (pool::close_stale), closed.
  void close_stale_connections();

  health_table& health() { return health_; }
  const health_table& health() const { return health_; }
  // Requests of this worker waiting on or streaming from the upstream.
  std::size_t& active_streams(const std::string& upstream) { return active_streams_[upstream]; }
  // For weighted picks and jittered backoff.
  std::mt19937_64& rng() { return rng_; }
  // This worker's same-target retries per upstream (upstream/retry_policy.hpp).
  retry_budget& retries() { return retries_; }

 private:
  const std::string& identity_of(const config::upstream& settings);

  net::any_io_executor executor_;
  metrics::shard& metrics_;
  std::map<std::string, std::unique_ptr<pool>> pools_;
  std::string pool_identity_;  // pool_for's key, rebuilt in place (identity_of)
  std::shared_ptr<net::ssl::context> upstream_tls_;  // default trust store
  std::map<std::string, std::shared_ptr<net::ssl::context>> tls_by_ca_;
  health_table health_;
  retry_budget retries_;
  std::map<std::string, std::size_t> active_streams_;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace tokengate::upstream
