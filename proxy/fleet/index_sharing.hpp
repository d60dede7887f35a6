#pragma once
// Several tokengate instances in front of one fleet, one picture of what
// each replica's cache holds. Every prompt an instance sends to a replica
// is published on Redis (the budgets' `redis:`, channel
// <key_prefix>:fleet:blocks: the instance, the upstream's name and the
// prompt's block names, binary), and what the other instances sent is put
// in this instance's index of that replica, so that a tenant's requests
// go where its document is cached whichever instance they reach.
//
// Off the request path and bounded: a request only queues its message
// (past `max_queued` it is dropped and counted); one connection publishes
// the queue, another listens, both on one worker's thread. While Redis is
// down, each instance learns alone, and the listener tries again every
// second.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "io/net.hpp"
#include "redis/client.hpp"
#include "redis/store_health.hpp"

namespace tokengate::fleet {

class board;

class index_sharing {
 public:
  // The upstreams whose indexes the others' messages may fill, and their
  // declared KV caches (capacity.kv_tokens).
  struct shared_upstream {
    std::string name;
    long long kv_tokens = 0;
  };
  index_sharing(net::any_io_executor executor, const config::redis_settings& redis, board& fleet,
                std::vector<shared_upstream> upstreams);
  ~index_sharing();
  void start();
  void stop();

  // From any thread: the prompt's blocks were sent to `upstream`.
  void publish(const std::string& upstream, std::span<const std::uint64_t> blocks);

  // tokengate_fleet_shared_prompts_total{direction}.
  std::string prometheus() const;

  static constexpr std::size_t max_queued = 1024;  // messages not yet published
  static constexpr std::size_t max_blocks = 1024;  // a prompt's first 64K tokens

  // The message's bytes, and back (nullopt: not one, or this instance's own).
  static std::string encode(std::uint64_t instance, const std::string& upstream,
                            std::span<const std::uint64_t> blocks);
  struct message {
    std::uint64_t instance = 0;
    std::string upstream;
    std::vector<std::uint64_t> blocks;
  };
  static std::optional<message> decode(std::string_view bytes);

 private:
  void drain();
  net::awaitable<void> listen();
  net::awaitable<std::string> listen_once();
  void received(std::string_view payload);

  net::any_io_executor executor_;
  config::redis_settings redis_;
  board& fleet_;
  std::vector<shared_upstream> upstreams_;
  std::string channel_;
  std::uint64_t instance_;
  redis::store_health health_;
  std::unique_ptr<redis::client> publisher_;
  std::shared_ptr<tcp::socket> listener_;  // (closed to stop)
  std::atomic<bool> stopped_{false};

  std::mutex lock_;
  std::deque<std::string> queued_;
  bool drain_posted_ = false;
  std::atomic<std::uint64_t> published_{0}, publish_failed_{0}, dropped_{0}, received_{0};
};

}  // namespace tokengate::fleet
