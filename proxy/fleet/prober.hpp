#pragma once
// Active health checks and engine metrics, off the request path: for each
// upstream with `health_check`, a GET of its path every interval (a 2xx
// within the timeout passes; anything else fails), and for each with
// `engine_metrics`, its metrics page read into the upstream's load
// (engine_gauges.hpp). `unhealthy_after` failures in a row take the
// upstream out of rotation for every worker, `healthy_after` passes bring
// it back; each change is logged once. Runs on one worker's thread, over
// fresh connections of that worker's pools (a probe must not wait behind
// requests for a pooled connection, nor be answered on a stale one).
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "config/config.hpp"
#include "fleet/board.hpp"
#include "io/net.hpp"
#include "upstream/worker_upstreams.hpp"

namespace tokengate::fleet {

class prober {
 public:
  using snapshot_fn = std::function<std::shared_ptr<const config::config>()>;
  prober(board& b, snapshot_fn snapshot, upstream::worker_upstreams& pools)
      : board_(b), snapshot_(std::move(snapshot)), pools_(pools) {}

  // Starts the loop on `executor` (the thread of `pools`' worker).
  void start(net::any_io_executor executor);

 private:
  struct track {
    std::chrono::steady_clock::time_point next_check{}, next_metrics{};
    bool checking = false, reading = false;
    int failures = 0, passes = 0;
  };
  net::awaitable<void> loop();
  net::awaitable<void> check(std::shared_ptr<const config::config> cfg, std::string name);
  net::awaitable<void> read_metrics(std::shared_ptr<const config::config> cfg, std::string name);
  void judge(const config::upstream& u, bool passed, const std::string& why);

  board& board_;
  snapshot_fn snapshot_;
  upstream::worker_upstreams& pools_;
  std::map<std::string, track> tracks_;
};

}  // namespace tokengate::fleet
