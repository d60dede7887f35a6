#include "cache/store.hpp"

#include "metrics/prometheus_text.hpp"

namespace tokengate::cache {

store::store(std::size_t max_bytes, std::optional<config::redis_settings> shared)
    : max_bytes_(max_bytes), shared_(std::move(shared)) {
  if (shared_)
    health_.emplace("redis at " + shared_->host + ":" + std::to_string(shared_->port),
                    "response cache", "every lookup is a miss until it does",
                    "answers are shared again");
}

std::shared_ptr<const entry> store::find(const std::string& key, wall_clock::time_point now,
                                         std::optional<std::chrono::seconds> max_age) {
  std::lock_guard lock(mutex_);
  auto found = by_key_.find(key);
  if (found == by_key_.end()) return nullptr;
  auto it = found->second;
  if (it->e->expires <= now) {
    drop(it);
    return nullptr;
  }
  if (max_age && now - it->e->stored > *max_age) return nullptr;  // (still good for others)
  recent_.splice(recent_.begin(), recent_, it);
  return it->e;
}

void store::keep(const std::string& key, std::shared_ptr<const entry> e) {
  std::lock_guard lock(mutex_);
  if (e->bytes() > max_bytes_) return;
  if (auto found = by_key_.find(key); found != by_key_.end()) drop(found->second);
  ++counts_[e->route].stored;
  bytes_ += e->bytes();
  recent_.push_front({key, std::move(e)});
  by_key_.emplace(key, recent_.begin());
  evict_to_bound();
}

void store::set_bound(std::size_t max_bytes) {
  std::lock_guard lock(mutex_);
  max_bytes_ = max_bytes;
  evict_to_bound();
}

void store::drop(std::list<slot>::iterator it) {
  bytes_ -= it->e->bytes();
  by_key_.erase(it->key);
  recent_.erase(it);
}

void store::evict_to_bound() {
  while (bytes_ > max_bytes_ && !recent_.empty()) {
    auto last = std::prev(recent_.end());
    ++counts_[last->e->route].evictions;
    drop(last);
  }
}

void store::count_hit(const std::string& route, long long tokens_saved) {
  std::lock_guard lock(mutex_);
  auto& c = counts_[route];
  ++c.hits;
  c.tokens_saved += static_cast<std::uint64_t>(std::max(0LL, tokens_saved));
}

void store::count_stored(const std::string& route) {
  std::lock_guard lock(mutex_);
  ++counts_[route].stored;
}

void store::count_miss(const std::string& route) {
  std::lock_guard lock(mutex_);
  ++counts_[route].misses;
}

void store::count_bypass(const std::string& route) {
  std::lock_guard lock(mutex_);
  ++counts_[route].bypasses;
}

std::string store::prometheus() const {
  using metrics::metric_type;
  std::lock_guard lock(mutex_);
  metrics::prometheus_text out;
  out.family("tokengate_cache_requests_total", metric_type::counter,
             "Requests on routes with a response cache, by result: hit (answered from the "
             "cache), miss (asked upstream, kept if it completes), bypass (not cacheable, or "
             "the client said no-cache).");
  for (const auto& [route, c] : counts_) {
    out.sample({{"route", route}, {"result", "hit"}}, c.hits);
    out.sample({{"route", route}, {"result", "miss"}}, c.misses);
    out.sample({{"route", route}, {"result", "bypass"}}, c.bypasses);
  }
  out.family("tokengate_cache_stored_total", metric_type::counter,
             "Completed answers kept in the response cache.");
  for (const auto& [route, c] : counts_) out.sample({{"route", route}}, c.stored);
  out.family("tokengate_cache_evictions_total", metric_type::counter,
             "Entries the response cache let go to stay within cache.max_bytes.");
  for (const auto& [route, c] : counts_) out.sample({{"route", route}}, c.evictions);
  out.family("tokengate_cache_tokens_saved_total", metric_type::counter,
             "Input and output tokens the answers served from the cache cost when they were "
             "asked upstream.");
  for (const auto& [route, c] : counts_) out.sample({{"route", route}}, c.tokens_saved);
  if (health_) {
    out.family("tokengate_cache_store_up", metric_type::gauge,
               "Whether the response cache's Redis answered last time (cache: {store: redis}).");
    out.sample(health_->up() ? 1 : 0);
    out.family("tokengate_cache_store_failures_total", metric_type::counter,
               "Lookups in the response cache's Redis that became misses: connections lost, "
               "replies that broke the protocol, waits past redis.timeout.");
    out.sample(health_->failures());
  }
  out.family("tokengate_cache_entries", metric_type::gauge,
             "Entries in the in-process response cache (0 with cache: {store: redis}).");
  out.sample(recent_.size());
  out.family("tokengate_cache_bytes", metric_type::gauge,
             "Bytes the response cache's entries hold.");
  out.sample(bytes_);
  return out.take();
}

}  // namespace tokengate::cache
