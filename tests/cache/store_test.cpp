// cache/store: bounded in bytes, least recently used out first, entries
// gone at their TTL, a client's max-age honoured, counts by route.
#include "cache/store.hpp"

#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;
namespace cache = tokengate::cache;

std::shared_ptr<const cache::entry> entry_of(std::size_t body_bytes,
                                             cache::wall_clock::time_point at,
                                             std::chrono::seconds ttl = 60s) {
  auto e = std::make_shared<cache::entry>();
  e->route = "r";
  e->body.assign(body_bytes, 'x');
  e->stored = at;
  e->expires = at + ttl;
  return e;
}

TEST(CacheStore, TheLeastRecentlyUsedGoFirstToStayWithinTheBound) {
  const auto now = cache::wall_clock::now();
  const auto one = entry_of(1000, now)->bytes();
  cache::store s(3 * one);
  s.keep("a", entry_of(1000, now));
  s.keep("b", entry_of(1000, now));
  s.keep("c", entry_of(1000, now));
  ASSERT_TRUE(s.find("a", now, std::nullopt));  // a is now the most recent
  s.keep("d", entry_of(1000, now));
  EXPECT_FALSE(s.find("b", now, std::nullopt));
  EXPECT_TRUE(s.find("a", now, std::nullopt));
  EXPECT_TRUE(s.find("c", now, std::nullopt));
  EXPECT_TRUE(s.find("d", now, std::nullopt));
  auto page = s.prometheus();
  EXPECT_NE(page.find("tokengate_cache_evictions_total{route=\"r\"} 1"), std::string::npos) << page;
  EXPECT_NE(page.find("tokengate_cache_entries 3"), std::string::npos);
  EXPECT_NE(page.find("tokengate_cache_bytes " + std::to_string(3 * one)), std::string::npos);
}

TEST(CacheStore, AnEntryLargerThanTheWholeBoundIsNotKept) {
  const auto now = cache::wall_clock::now();
  cache::store s(2048);
  s.keep("big", entry_of(4096, now));
  EXPECT_FALSE(s.find("big", now, std::nullopt));
}

TEST(CacheStore, EntriesExpireAndAClientMayAskForYoungerOnes) {
  const auto now = cache::wall_clock::now();
  cache::store s(1 << 20);
  s.keep("k", entry_of(10, now, 10s));
  EXPECT_TRUE(s.find("k", now + 9s, std::nullopt));
  EXPECT_FALSE(s.find("k", now + 9s, std::chrono::seconds(5)));  // too old for this client
  EXPECT_TRUE(s.find("k", now + 9s, std::chrono::seconds(20)));  // (still there for others)
  EXPECT_FALSE(s.find("k", now + 10s, std::nullopt));
  EXPECT_NE(s.prometheus().find("tokengate_cache_entries 0"), std::string::npos);
}

TEST(CacheStore, ReplacingAnEntryKeepsTheCountOfBytesRight) {
  const auto now = cache::wall_clock::now();
  cache::store s(1 << 20);
  s.keep("k", entry_of(100, now));
  s.keep("k", entry_of(300, now));
  EXPECT_EQ(s.find("k", now, std::nullopt)->body.size(), 300u);
  EXPECT_NE(
      s.prometheus().find("tokengate_cache_bytes " + std::to_string(entry_of(300, now)->bytes())),
      std::string::npos);
}

}  // namespace
