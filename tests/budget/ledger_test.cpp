// The budget arithmetic without a store: windows, the local ledger's
// all-or-nothing reservation and its settlement, what a request demands.
#include <gtest/gtest.h>

#include <cmath>

#include "budget/demand.hpp"
#include "budget/local_ledger.hpp"
#include "config/config.hpp"

namespace tokengate::budget {
namespace {

constexpr std::int64_t day_ms = 86'400'000;
// 2026-12-05T12:34:56.789Z
constexpr std::int64_t noonish = 1'796'474'096'789;

TEST(BudgetWindow, MinutesAndDaysAlignToUtc) {
  auto m = window_of(limit_kind::tokens_per_minute, noonish);
  EXPECT_EQ(m.start_ms % 60'000, 0);
  EXPECT_EQ(m.end_ms - m.start_ms, 60'000);
  EXPECT_LE(m.start_ms, noonish);
  EXPECT_GT(m.end_ms, noonish);
  auto d = window_of(limit_kind::tokens_per_day, noonish);
  EXPECT_EQ(d.start_ms % day_ms, 0);
  EXPECT_EQ(d.end_ms - d.start_ms, day_ms);
  EXPECT_LE(d.start_ms, noonish);
}

TEST(BudgetWindow, MonthsAreCalendarMonths) {
  // December 2026 has 31 days and starts on day 20788 since 1970-01-01.
  auto m = window_of(limit_kind::usd_per_month, noonish);
  EXPECT_EQ(m.start_ms, 20788LL * day_ms);
  EXPECT_EQ(m.end_ms, (20788LL + 31) * day_ms);
  // February 2028 (a leap year): 29 days.
  const std::int64_t feb_2028 = 21215LL * day_ms;  // 2028-02-01
  auto f = window_of(limit_kind::usd_per_month, feb_2028 + 5 * day_ms);
  EXPECT_EQ(f.start_ms, feb_2028);
  EXPECT_EQ(f.end_ms, feb_2028 + 29 * day_ms);
  // The last millisecond of a month is still in it.
  EXPECT_EQ(window_of(limit_kind::usd_per_month, m.end_ms - 1).start_ms, m.start_ms);
  EXPECT_EQ(window_of(limit_kind::usd_per_month, m.end_ms).start_ms, m.end_ms);
}

demand tokens_demand(long long limit, long long prompt, long long output) {
  demand d;
  d.estimate = {prompt, output};
  d.counters.push_back({"key:app", limit_kind::tokens_per_minute, limit, prompt + output});
  d.counters.push_back({"key:app", limit_kind::requests_per_minute, 100, 1});
  return d;
}

TEST(LocalLedger, ReservesUntilTheLimitThenRefusesNamingTheCounter) {
  local_ledger ledger;
  auto d = tokens_demand(1000, 100, 200);  // 300 a request
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(ledger.reserve(d, noonish).admitted) << i;
  auto fourth = ledger.reserve(d, noonish);
  EXPECT_FALSE(fourth.admitted);
  EXPECT_EQ(fourth.refused_at, 0u);
  EXPECT_EQ(fourth.states[0].used, 900);
  // All or nothing: the refused request took no request either.
  EXPECT_EQ(ledger.peek(d, noonish)[1].used, 3);
}

TEST(LocalLedger, SettlementGivesBackWhatWasNotUsed) {
  local_ledger ledger;
  auto d = tokens_demand(1000, 100, 200);
  auto r = ledger.reserve(d, noonish);
  ledger.settle(d, r, {100, 20});
  EXPECT_EQ(ledger.peek(d, noonish)[0].used, 120);
  EXPECT_EQ(ledger.peek(d, noonish)[1].used, 1);  // a request stays a request
}

TEST(LocalLedger, ANewWindowStartsEmpty) {
  local_ledger ledger;
  auto d = tokens_demand(300, 100, 200);
  EXPECT_TRUE(ledger.reserve(d, noonish).admitted);
  EXPECT_FALSE(ledger.reserve(d, noonish).admitted);
  EXPECT_TRUE(ledger.reserve(d, noonish + 60'000).admitted);
}

TEST(LocalLedger, ConcurrencySlotsComeBackAtSettlement) {
  local_ledger ledger;
  demand d;
  d.counters.push_back({"route:chat", limit_kind::concurrent_streams, 2, 1});
  auto a = ledger.reserve(d, noonish);
  auto b = ledger.reserve(d, noonish);
  EXPECT_TRUE(a.admitted && b.admitted);
  EXPECT_FALSE(ledger.reserve(d, noonish).admitted);
  ledger.settle(d, a, {});
  EXPECT_TRUE(ledger.reserve(d, noonish).admitted);
}

TEST(LocalLedger, AGiveBackUndoesTheRequestToo) {
  local_ledger ledger;
  auto d = tokens_demand(1000, 100, 200);
  auto r = ledger.reserve(d, noonish);
  ledger.give_back(d, r);
  EXPECT_EQ(ledger.peek(d, noonish)[0].used, 0);
  EXPECT_EQ(ledger.peek(d, noonish)[1].used, 0);
}

// The store said 700 of 1,000 tokens were used this minute; then it went
// away. One instance alone carries on from 700, not from zero.
reservation store_reply(const demand& d, long long tokens_used, long long requests_used) {
  reservation r;
  r.admitted = true;
  r.states = {{tokens_used, 30'000}, {requests_used, 30'000}};
  return r;
}

TEST(LocalLedger, WhileTheStoreIsDownItCarriesOnFromTheStoresLastCount) {
  local_ledger ledger;
  auto d = tokens_demand(1000, 100, 200);  // 300 a request
  ledger.saw_in_store(d, store_reply(d, 700, 5), noonish);
  EXPECT_EQ(ledger.peek(d, noonish)[0].used, 700);
  // 700 + 300 fits the limit exactly; a second would not.
  EXPECT_TRUE(ledger.reserve_while_store_down(d, noonish, 1).admitted);
  EXPECT_FALSE(ledger.reserve_while_store_down(d, noonish, 1).admitted);
  ledger.saw_in_store(d, store_reply(d, 700, 5), noonish);  // (a later word from the store)
  auto small = tokens_demand(1000, 0, 0);
  small.counters[0].amount = 0;
  auto r = ledger.reserve_while_store_down(small, noonish, 1);
  EXPECT_TRUE(r.admitted);
  EXPECT_EQ(r.states[0].used, 1000);  // its own count, above the store's last word
  EXPECT_TRUE(r.to_carry);
}

TEST(LocalLedger, EachReplicaTakesItsShareOfWhatWasLeft) {
  local_ledger ledger;
  auto d = tokens_demand(1000, 50, 50);  // 100 a request
  ledger.saw_in_store(d, store_reply(d, 600, 5), noonish);
  // Two replicas share the 400 left: 200 each, so 600 + 200.
  EXPECT_TRUE(ledger.reserve_while_store_down(d, noonish, 2).admitted);
  EXPECT_TRUE(ledger.reserve_while_store_down(d, noonish, 2).admitted);
  EXPECT_FALSE(ledger.reserve_while_store_down(d, noonish, 2).admitted);
}

TEST(LocalLedger, WhatWasCountedAloneIsCarriedOverSettledOnceThenForgotten) {
  local_ledger ledger;
  auto d = tokens_demand(1000, 100, 200);
  ledger.saw_in_store(d, store_reply(d, 100, 1), noonish);
  EXPECT_FALSE(ledger.has_carry_over());
  auto r = ledger.reserve_while_store_down(d, noonish, 1);
  ledger.settle(d, r, {100, 20});  // 300 reserved, 120 used
  ASSERT_TRUE(ledger.has_carry_over());
  auto carried = ledger.take_carry_over(noonish + 1);
  ASSERT_EQ(carried.size(), 2u);
  long long tokens = 0, requests = 0;
  for (const auto& c : carried) {
    (c.key.find("tokens_per_minute") != std::string::npos ? tokens : requests) += c.delta;
    EXPECT_EQ(c.window_end_ms, window_of(limit_kind::tokens_per_minute, noonish).end_ms);
    EXPECT_EQ(c.key.rfind("key:app:", 0), 0u) << c.key;
  }
  EXPECT_EQ(tokens, 120);
  EXPECT_EQ(requests, 1);
  EXPECT_FALSE(ledger.has_carry_over());
  EXPECT_TRUE(ledger.take_carry_over(noonish + 2).empty());
  // Not taken by the store: kept for the next try, but not past its window.
  ledger.put_back(carried);
  EXPECT_EQ(ledger.take_carry_over(noonish + 3).size(), 2u);
  ledger.put_back(carried);
  EXPECT_TRUE(ledger.take_carry_over(noonish + 60'000).empty());
}

TEST(LocalLedger, AnAbandonedSlotExpires) {
  local_ledger ledger;
  demand d;
  d.slot_ttl_ms = 1000;
  d.counters.push_back({"route:chat", limit_kind::concurrent_streams, 1, 1});
  EXPECT_TRUE(ledger.reserve(d, noonish).admitted);
  EXPECT_FALSE(ledger.reserve(d, noonish + 999).admitted);
  EXPECT_TRUE(ledger.reserve(d, noonish + 1000).admitted);
}

TEST(LocalLedger, WithNothingSeenInTheStoreReplicasShareTheWholeLimit) {
  local_ledger ledger;
  auto d = tokens_demand(900, 100, 200);  // 900 / 3 replicas = one request
  EXPECT_TRUE(ledger.reserve_while_store_down(d, noonish, 3).admitted);
  EXPECT_FALSE(ledger.reserve_while_store_down(d, noonish, 3).admitted);
}

TEST(BudgetDemand, KeyAndRouteBudgetsBothApply) {
  auto cfg = config::load_config_text(R"(
listeners: [{port: 0}]
upstreams: {e: {base_url: "http://127.0.0.1:1/v1"}}
routes:
  - name: chat
    models: ["gpt-*"]
    targets: [{upstream: e}]
    budget: {requests_per_minute: 60, concurrent_streams: 4}
keys:
  - name: app
    sha256: "0000000000000000000000000000000000000000000000000000000000000000"
    budget: {tokens_per_minute: 10000, usd_per_day: 2.5}
prices:
  "gpt-*": {input_per_million: 2, output_per_million: 10}
)",
                                      "budget.yaml");
  auto d = demand_for(*cfg, cfg->routes[0], &cfg->keys[0], "gpt-4o", 4000, 500);
  ASSERT_EQ(d.counters.size(), 4u);
  EXPECT_EQ(d.counters[0].scope, "key:app");
  EXPECT_EQ(d.counters[0].kind, limit_kind::tokens_per_minute);
  EXPECT_EQ(d.counters[0].amount, 1000 + 500);  // 4000 bytes / 4 + the output limit
  EXPECT_EQ(d.counters[1].kind, limit_kind::usd_per_day);
  EXPECT_EQ(d.counters[1].limit, 2'500'000);             // micro-dollars
  EXPECT_EQ(d.counters[1].amount, 1000 * 2 + 500 * 10);  // at $2 / $10 per million
  EXPECT_EQ(d.counters[2].scope, "route:chat");
  EXPECT_EQ(d.counters[3].kind, limit_kind::concurrent_streams);
  // Without an output limit the reservation assumes the fixed reserve.
  auto open = demand_for(*cfg, cfg->routes[0], &cfg->keys[0], "gpt-4o", 0, std::nullopt);
  EXPECT_EQ(open.counters[0].amount, output_reserve_without_limit);
  // Settling at real usage moves the token and USD counters only.
  auto deltas = settle_deltas(d, {800, 100});
  EXPECT_EQ(deltas[0], 900 - 1500);
  EXPECT_EQ(deltas[1], (800 * 2 + 100 * 10) - (1000 * 2 + 500 * 10));
  EXPECT_EQ(deltas[2], 0);
  EXPECT_EQ(deltas[3], 0);
}

// Input read from a prompt cache and input written to one are priced
// apart; a price that names neither charges both as input.
TEST(BudgetDemand, CachedAndCacheWrittenInputAtTheirOwnPrices) {
  auto cfg = config::load_config_text(R"(
listeners: [{port: 0}]
upstreams: {e: {base_url: "http://127.0.0.1:1/v1", kind: anthropic}}
routes:
  - {name: chat, models: ["claude-*", "plain"], targets: [{upstream: e}], budget: {usd_per_day: 5}}
prices:
  "claude-*": {input_per_million: 3, output_per_million: 15,
               cached_input_per_million: 0.3, cache_write_per_million: 3.75}
  plain: {input_per_million: 3, output_per_million: 15}
)",
                                      "cache_prices.yaml");
  auto d = demand_for(*cfg, cfg->routes[0], nullptr, "claude-sonnet", 4000, 100);
  EXPECT_DOUBLE_EQ(d.cached_input_price, 0.3);
  EXPECT_DOUBLE_EQ(d.cache_write_price, 3.75);
  // 10,000 prompt tokens: 8,000 read, 1,000 written, 1,000 neither; 100 out.
  usage u{10'000, 100, 8'000, 1'000};
  EXPECT_EQ(amount_of(limit_kind::usd_per_day, u, d),
            std::llround(1000 * 3 + 8000 * 0.3 + 1000 * 3.75 + 100 * 15));
  // Token counters count every prompt token.
  EXPECT_EQ(amount_of(limit_kind::tokens_per_day, u, d), 10'100);
  auto plain = demand_for(*cfg, cfg->routes[0], nullptr, "plain", 4000, 100);
  EXPECT_EQ(amount_of(limit_kind::usd_per_day, u, plain), 10'000 * 3 + 100 * 15);
  // Counts beyond the prompt (a usage that disagrees with itself) are bounded by it.
  usage odd{100, 0, 500, 500};
  EXPECT_EQ(amount_of(limit_kind::usd_per_day, odd, d), std::llround(100 * 0.3));
}

}  // namespace
}  // namespace tokengate::budget
