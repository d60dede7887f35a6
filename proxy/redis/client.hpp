#pragma once
// One worker's connection to Redis: commands pipelined on one socket,
// replies matched to them in order, all on the worker's own thread.
//
// It never makes a request wait on a dead store: while the connection is
// down, commands fail at once, and a new connection is tried a second after
// the last failure (so Redis coming back is picked up without a restart).
// A store that stops answering is noticed by a watchdog (the oldest command
// waiting past `stall_after`) and the connection closed; a reply that
// breaks the protocol closes it too. Every command queued on a closed
// connection gets its callback with no reply.
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "io/net.hpp"
#include "redis/resp.hpp"
#include "redis/store_health.hpp"

namespace tokengate::redis {

class client {
 public:
  using callback = std::function<void(std::optional<reply>)>;

  // `scripts` are loaded (SCRIPT LOAD) on every new connection before any
  // command, so EVALSHA always finds them, also after Redis restarted.
  client(net::any_io_executor executor, const config::redis_settings& settings,
         std::vector<std::string> scripts, store_health& health);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // Queues one command; `done` runs on this worker's thread with the reply,
  // or with nullopt when there is no connection or it ended first.
  void send(std::vector<std::string> args, callback done);
  void stop();

  static constexpr auto stall_after = std::chrono::seconds(1);
  static constexpr auto retry_after = std::chrono::seconds(1);
  static constexpr std::size_t max_waiting = 65536;

 private:
  struct connection;
  void open_connection();
  void handshake(connection& c);
  net::awaitable<void> run(std::shared_ptr<connection> c);
  net::awaitable<void> write_loop(std::shared_ptr<connection> c);
  net::awaitable<void> read_loop(std::shared_ptr<connection> c);
  net::awaitable<void> watchdog(std::shared_ptr<connection> c);
  // (By value: `c` may be current_, its only owner, which it resets.)
  void close(std::shared_ptr<connection> c, std::string_view why);

  net::any_io_executor executor_;
  config::redis_settings settings_;
  std::vector<std::string> scripts_;
  store_health& health_;
  std::shared_ptr<connection> current_;
  std::chrono::steady_clock::time_point retry_at_{};
  bool stopped_ = false;
};

}  // namespace tokengate::redis
