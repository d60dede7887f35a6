#include "fleet/picker.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "config/config.hpp"
#include "fleet/prefix_key.hpp"
#include "upstream/health.hpp"

namespace tokengate::fleet {
namespace {

std::shared_ptr<const config::config> three_targets(const std::string& route_extra) {
  return config::load_config_text(
      "listeners: [{name: main, port: 0}]\n"
      "upstreams: {a: {base_url: 'http://a/v1'}, b: {base_url: 'http://b/v1'},"
      " c: {base_url: 'http://c/v1'}}\n"
      "routes: [{models: [m], targets: [{upstream: a, weight: 2}, {upstream: b},"
      " {upstream: c}]" +
          route_extra + "}]\n",
      "t");
}

std::vector<target_state> idle(const config::route& r) {
  std::vector<target_state> s;
  for (const auto& t : r.targets)
    s.push_back({&t, true, 0, 0, 0, std::hash<std::string>{}(t.upstream)});
  return s;
}

TEST(Picker, IdleTargetsAreChosenByWeightEitherWay) {
  for (auto balance : {"least_loaded", "weighted_random"}) {
    auto c = three_targets(std::string(", balance: ") + balance);
    auto states = idle(c->routes[0]);
    std::mt19937_64 rng(7);
    std::map<std::size_t, int> first;
    for (int i = 0; i < 8000; ++i) {
      auto p = pick_order(c->routes[0], states, std::nullopt, rng);
      ASSERT_EQ(p.order.size(), 3u);
      first[p.order[0]]++;
    }
    // least_loaded draws two by weight and keeps the first on a tie.
    EXPECT_NEAR(first[0] / 8000.0, 0.5, 0.04) << balance;
    EXPECT_NEAR(first[1] / 8000.0, 0.25, 0.04) << balance;
  }
}

TEST(Picker, LeastLoadedAvoidsTheBusyTargetAndListsTheRestByLoad) {
  auto c = three_targets("");
  auto states = idle(c->routes[0]);
  states[0].tokens = 9000;  // a: heavily loaded (weight 2: 4500 per unit)
  states[1].tokens = 100;
  states[2].tokens = 50;
  std::mt19937_64 rng(1);
  std::map<std::size_t, int> first;
  for (int i = 0; i < 2000; ++i) {
    auto p = pick_order(c->routes[0], states, std::nullopt, rng);
    first[p.order[0]]++;
    if (p.order[0] != 0) {
      EXPECT_EQ(p.order.back(), 0u);  // the busiest last
    }
  }
  // a is first only when both draws were a: never (two distinct targets are drawn).
  EXPECT_EQ(first[0], 0);
  EXPECT_GT(first[2], first[1]);
}

// weight 0 = fallback only: never first while a weighted target is healthy,
// however loaded that one is and however idle the fallback.
TEST(Picker, AWeightZeroTargetIsOnlyEverAFallback) {
  for (auto extra : {", balance: least_loaded", ", balance: weighted_random",
                     ", affinity: {max_load_ratio: 1.5}"}) {
    auto c = config::load_config_text(
        "listeners: [{name: main, port: 0}]\n"
        "upstreams: {a: {base_url: 'http://a/v1'}, spare: {base_url: 'http://s/v1'},"
        " c: {base_url: 'http://c/v1'}}\n"
        "routes: [{models: [m], targets: [{upstream: a}, {upstream: spare, weight: 0},"
        " {upstream: c}]" +
            std::string(extra) + "}]\n",
        "t");
    auto states = idle(c->routes[0]);
    states[0].tokens = 9000;  // both weighted targets busy, the spare idle
    states[2].tokens = 4000;
    std::mt19937_64 rng(11);
    for (std::uint64_t i = 1; i <= 500; ++i) {
      auto p = pick_order(c->routes[0], states, i, rng);
      ASSERT_EQ(p.order.size(), 3u) << extra;
      EXPECT_NE(p.order[0], 1u) << extra;
      EXPECT_EQ(p.order.back(), 1u) << extra << ": the fallback after the weighted ones";
    }
    // The weighted ones ejected: the healthy fallback before them.
    states[0].healthy = states[2].healthy = false;
    EXPECT_EQ(pick_order(c->routes[0], states, 7, rng).order, (std::vector<std::size_t>{1, 0, 2}))
        << extra;
  }
}

TEST(Picker, EjectedTargetsComeLastInTheRoutesOrder) {
  auto c = three_targets("");
  auto states = idle(c->routes[0]);
  states[0].healthy = false;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200; ++i) {
    auto p = pick_order(c->routes[0], states, std::nullopt, rng);
    EXPECT_NE(p.order[0], 0u);
    EXPECT_EQ(p.order.back(), 0u);
  }
  for (auto& s : states) s.healthy = false;  // all ejected: still all tried, in order
  auto p = pick_order(c->routes[0], states, std::nullopt, rng);
  EXPECT_EQ(p.order, (std::vector<std::size_t>{0, 1, 2}));
}

TEST(Picker, AConversationKeepsItsTargetUntilThatTargetIsOverloaded) {
  auto c = three_targets(", affinity: {max_load_ratio: 1.5}");
  auto states = idle(c->routes[0]);
  std::mt19937_64 rng(5);
  std::map<std::size_t, int> homes;
  for (std::uint64_t conversation = 1; conversation <= 3000; ++conversation) {
    auto p = pick_order(c->routes[0], states, conversation, rng);
    ASSERT_TRUE(p.by_affinity);
    // The same conversation, asked again: the same target.
    EXPECT_EQ(pick_order(c->routes[0], states, conversation, rng).order[0], p.order[0]);
    homes[p.order[0]]++;
  }
  // Rendezvous ranks follow the weights (2:1:1).
  EXPECT_NEAR(homes[0] / 3000.0, 0.5, 0.04);
  EXPECT_NEAR(homes[2] / 3000.0, 0.25, 0.04);

  // Its home loaded past 1.5 × its share: the conversation goes elsewhere.
  const std::uint64_t conversation = 42;
  const auto home = pick_order(c->routes[0], states, conversation, rng).order[0];
  states[home].busy = 12;
  auto p = pick_order(c->routes[0], states, conversation, rng);
  EXPECT_NE(p.order[0], home);
  EXPECT_TRUE(p.spilled);
  // A home that is full while another target has a free slot: elsewhere too.
  for (auto& s : states) {
    s.max_streams = 4;
    s.busy = 3;  // (not overloaded: only full)
  }
  states[home].busy = 4;
  EXPECT_NE(pick_order(c->routes[0], states, conversation, rng).order[0], home);
  // … unless the request may wait for its home's slot (affinity.hold).
  auto held = pick_order(c->routes[0], states, conversation, rng, true);
  EXPECT_EQ(held.order[0], home);
  EXPECT_TRUE(held.by_affinity);
}

TEST(Health, PassiveEjectionAndBackoff) {
  upstream::health_table health;
  config::health_settings settings{2, std::chrono::seconds(30)};
  auto now = upstream::health_table::clock::now();
  EXPECT_FALSE(health.record_failure("a", settings, now));
  EXPECT_TRUE(health.record_failure("a", settings, now));
  EXPECT_TRUE(health.ejected("a", now + std::chrono::seconds(1)));
  EXPECT_FALSE(health.ejected("a", now + std::chrono::seconds(31)));
  std::mt19937_64 rng(9);
  auto backoff = upstream::backoff_for(3, std::chrono::milliseconds(100), rng);
  EXPECT_GE(backoff.count(), 200);
  EXPECT_LE(backoff.count(), 600);
}

std::optional<std::uint64_t> key_of(const std::string& body, std::size_t prefix_bytes = 4096) {
  routing::scan_error error;
  auto scan = routing::scan_object(body, error);
  EXPECT_TRUE(scan) << error.message;
  return conversation_key(body, *scan, prefix_bytes);
}

TEST(PrefixKey, EveryTurnOfAConversationHasTheKeyOfItsStart) {
  const std::string start =
      R"({"role":"system","content":"You are terse."},{"role":"user","content":"Name a prime."})";
  auto turn1 = key_of(R"({"model":"m","messages":[)" + start + "]}");
  auto turn2 =
      key_of(R"({"model":"m","stream":true,"messages":[)" + start +
             R"(,{"role":"assistant","content":"7"},{"role":"user","content":"Another."}]})");
  ASSERT_TRUE(turn1);
  EXPECT_EQ(turn1, turn2);
  auto other = key_of(
      R"({"model":"m","messages":[{"role":"system","content":"You are terse."},{"role": "user","content":"Name a colour."}]})");
  EXPECT_NE(turn1, other);
  // Anthropic: the system prompt is its own member.
  auto a1 = key_of(R"({"model":"m","system":"A","messages":[{"role":"user","content":"hi"}]})");
  auto a2 = key_of(R"({"model":"m","system":"B","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_NE(a1, a2);
  // A completion's prompt: its first bytes.
  EXPECT_EQ(key_of(R"({"model":"m","prompt":"abcdefgh-1"})", 64),
            key_of(R"({"model":"m","prompt":"abcdefgh-1"})", 64));
  EXPECT_FALSE(key_of(R"({"model":"m"})"));
  // A "role" inside a content string does not end the start early.
  auto tricky1 = key_of(
      R"({"model":"m","messages":[{"role":"system","content":"say \"role\": \"user\""},{"role":"user","content":"x"}]})");
  auto tricky2 = key_of(
      R"({"model":"m","messages":[{"role":"system","content":"say \"role\": \"user\""},{"role":"user","content":"y"}]})");
  EXPECT_NE(tricky1, tricky2);
}

}  // namespace
}  // namespace tokengate::fleet
