#pragma once
// The response cache in Redis (top-level `cache: {store: redis}`), on the
// `redis:` connection settings the budgets use: every instance that shares
// the store shares its answers. One per worker, with its own connection.
//
// An entry is one string value, `<key_prefix>:cache:<key>`, set with its
// TTL (SET ... PX), so Redis lets it go when it expires. A lookup waits at
// most `redis.timeout`, as a budget reservation does; a store that does
// not answer in time, is down, or holds something unreadable is a miss,
// never an error or a stall. Keeping is sent without waiting. An entry
// larger than a reply may be (redis::max_bulk_bytes, 16 MiB) is not kept.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cache/store.hpp"
#include "config/config.hpp"
#include "io/net.hpp"
#include "redis/client.hpp"
#include "redis/store_health.hpp"

namespace tokengate::cache {

// An entry as stored: a header line of JSON (what the entry is, never a
// header to send: the replay makes its own), then the body as received.
std::string serialized(const entry& e);
// Null when `value` is not one (written by another version, or damaged).
std::shared_ptr<entry> deserialized(std::string_view value);

class redis_store {
 public:
  redis_store(net::any_io_executor executor, const config::redis_settings& settings,
              redis::store_health& health);

  // The entry under `key`, or null (absent, older than `max_age`, or the
  // store did not answer within redis.timeout).
  net::awaitable<std::shared_ptr<const entry>> find(const std::string& key,
                                                    wall_clock::time_point now,
                                                    std::optional<std::chrono::seconds> max_age);
  // Sent, not awaited; its TTL is what is left of the entry's life.
  // `kept` runs once Redis has taken it.
  void keep(const std::string& key, const entry& e, std::function<void()> kept);

 private:
  std::string redis_key(const std::string& key) const;

  net::any_io_executor executor_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  redis::store_health& health_;
  redis::client client_;
};

}  // namespace tokengate::cache
