#pragma once
// The in-process response cache: completed answers by key (cache/key.hpp),
// least recently used first out, bounded in bytes, shared by the workers
// behind one mutex (a lookup or an insert is a hash-table step and a list
// splice: nothing is copied under the lock but a shared pointer).
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "http/dialect.hpp"
#include "redis/store_health.hpp"

namespace tokengate::cache {

using wall_clock = std::chrono::system_clock;

// When a stored stream's bytes arrived: body[previous mark's end, end)
// came `at` after the first of them (cache: {pace: original} replays it so).
struct arrival_mark {
  std::size_t end = 0;
  std::chrono::milliseconds at{0};
};

// One completed answer, as the upstream sent its body (an event stream, or
// one JSON document), in the client's dialect.
struct entry {
  std::string route;  // whose answer it is (its eviction is counted there)
  std::string body;
  std::vector<arrival_mark> marks;  // a stream's; none for a whole answer
  bool streamed = false;
  tokengate::dialect dialect = tokengate::dialect::other;
  std::string content_type;
  long long input_tokens = 0, output_tokens = 0;  // what it cost when it was asked
  wall_clock::time_point stored;
  wall_clock::time_point expires;
  std::size_t bytes() const {
    return body.size() + marks.size() * sizeof(arrival_mark) + content_type.size() + 256;
  }
};

// What happened to requests on one route, for /metrics.
struct route_counts {
  std::uint64_t hits = 0, misses = 0, bypasses = 0, stored = 0, evictions = 0;
  std::uint64_t tokens_saved = 0;  // input and output tokens a hit did not ask for again
};

class store {
 public:
  // `shared`: cache: {store: redis}, the entries are kept in that Redis
  // (cache/redis_store.hpp, one per worker) and this store only counts.
  explicit store(std::size_t max_bytes, std::optional<config::redis_settings> shared = {});

  const std::optional<config::redis_settings>& shared() const { return shared_; }
  redis::store_health* health() { return health_ ? &*health_ : nullptr; }

  // The entry under `key`, unless it has expired or is older than
  // `max_age` (a client's Cache-Control: max-age).
  std::shared_ptr<const entry> find(const std::string& key, wall_clock::time_point now,
                                    std::optional<std::chrono::seconds> max_age);
  // Keeps `e` under `key` (replacing what was there), then lets the least
  // recently used go until the bytes are within the bound. An entry larger
  // than the whole bound is not kept.
  void keep(const std::string& key, std::shared_ptr<const entry> e);

  void set_bound(std::size_t max_bytes);
  void count_hit(const std::string& route, long long tokens_saved);
  void count_miss(const std::string& route);
  void count_stored(const std::string& route);  // (kept in Redis)
  void count_bypass(const std::string& route);

  // The cache's families for /metrics (through the one metrics writer).
  std::string prometheus() const;

 private:
  struct slot {
    std::string key;
    std::shared_ptr<const entry> e;
  };
  void drop(std::list<slot>::iterator it);
  void evict_to_bound();

  mutable std::mutex mutex_;
  std::size_t max_bytes_;
  std::optional<config::redis_settings> shared_;
  std::optional<redis::store_health> health_;
  std::size_t bytes_ = 0;
  std::list<slot> recent_;  // most recently used first
  std::unordered_map<std::string, std::list<slot>::iterator> by_key_;
  std::map<std::string, route_counts> counts_;
};

}  // namespace tokengate::cache
