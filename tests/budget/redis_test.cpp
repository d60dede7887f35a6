// Budgets in a real Redis (started here, as scripts/setup installs it):
// the scripts reserve, refuse and settle as the local ledger does, on
// Redis's clock; two instances share one budget; a store that is down,
// answers garbage or stalls never holds a request past redis.timeout.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <thread>

#include "budget/gate.hpp"
#include "support/hand_upstream.hpp"
#include "support/minute_window.hpp"
#include "support/redis_server.hpp"

namespace tokengate::budget {
namespace {

using namespace std::chrono_literals;

template <typename T>
T run(net::io_context& io, net::awaitable<T> work) {
  auto done = net::co_spawn(io, std::move(work), net::use_future);
  // (the client's reads and watchdog keep the loop busy: run until done)
  while (done.wait_for(0s) != std::future_status::ready) {
    if (io.stopped()) io.restart();  // (out of work once: a closed connection)
    io.run_one_for(10ms);
  }
  return done.get();
}

config::redis_settings settings_for(std::uint16_t port, config::store_failure_mode mode) {
  config::redis_settings s;
  s.host = "127.0.0.1";
  s.port = port;
  s.timeout = 50ms;
  s.on_failure = mode;
  s.key_prefix = "test" + std::to_string(::getpid()) + "-" + std::to_string(port);
  return s;
}

demand tokens_demand(const std::string& scope, long long limit, long long each) {
  demand d;
  d.estimate = {each / 2, each - each / 2};
  d.counters.push_back({scope, limit_kind::tokens_per_minute, limit, each});
  d.counters.push_back({scope, limit_kind::usd_per_month, 1'000'000'000, 0});
  return d;
}

// One instance: its process-wide budgets and one worker's gate.
struct instance {
  explicit instance(const config::redis_settings& s) : shared(s), gate(io.get_executor(), shared) {}
  admission admit(demand d) { return run(io, gate.admit(std::move(d))); }
  net::io_context io;
  budgets shared;
  budget::gate gate;
};

TEST(RedisBudget, ReservesRefusesAndSettlesInTheStore) {
  test::redis_server redis;
  instance one(settings_for(redis.port(), config::store_failure_mode::deny));
  std::vector<admission> held;
  // (Each grant also leases up to an eighth of the limit, 125, which the
  // instance's next request takes first: one instance alone loses nothing.)
  for (int i = 0; i < 3; ++i) {
    held.push_back(one.admit(tokens_demand("key:a", 1000, 300)));
    ASSERT_EQ(held.back().outcome, admission::verdict::admitted) << i;
    EXPECT_TRUE(held.back().in_store);
  }
  auto fourth = one.admit(tokens_demand("key:a", 1000, 300));
  EXPECT_EQ(fourth.outcome, admission::verdict::refused);
  // Two settle at a tenth of their estimate: 540 back, room again.
  one.gate.settle(held[0], {15, 15});
  one.gate.settle(held[1], {15, 15});
  auto fifth = one.admit(tokens_demand("key:a", 1000, 300));
  ASSERT_EQ(fifth.outcome, admission::verdict::admitted);
  // Used as Redis counts it: 30 + 30 + 300 + 300 by requests, and the
  // 125 this instance holds leased.
  EXPECT_EQ(fifth.held.states[0].used, 660 + 125);
  EXPECT_EQ(one.shared.health()->failures(), 0u);
}

TEST(RedisBudget, SmallRequestsAreAdmittedFromLeasesWithoutARoundTrip) {
  test::redis_server redis;
  instance one(settings_for(redis.port(), config::store_failure_mode::deny));
  ASSERT_TRUE(one.admit(tokens_demand("key:l", 100000, 100)).in_store);  // grants 6400 more
  redis.stop();  // the leased 6,400 tokens need no Redis
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(one.admit(tokens_demand("key:l", 100000, 100)).outcome, admission::verdict::admitted)
        << i;
  EXPECT_EQ(one.admit(tokens_demand("key:l", 100000, 100)).outcome,
            admission::verdict::store_unavailable);
}

TEST(RedisBudget, TheScriptsWindowsAreTheLedgersWindows) {
  test::redis_server redis;
  instance one(settings_for(redis.port(), config::store_failure_mode::deny));
  auto a = one.admit(tokens_demand("key:w", 1000, 1));
  ASSERT_EQ(a.outcome, admission::verdict::admitted);
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  for (std::size_t i = 0; i < 2; ++i) {
    auto w = window_of(a.asked->counters[i].kind, now);
    EXPECT_NEAR(static_cast<double>(a.held.states[i].reset_ms), static_cast<double>(w.end_ms - now),
                2000.0)
        << i;
    EXPECT_TRUE(a.held.keys[i].ends_with(":" + std::to_string(w.start_ms))) << a.held.keys[i];
  }
}

TEST(RedisBudget, TwoInstancesShareOneBudget) {
  test::redis_server redis;
  auto settings = settings_for(redis.port(), config::store_failure_mode::deny);
  instance one(settings), two(settings);
  int admitted = 0;
  for (int i = 0; i < 12; ++i) {
    auto& which = i % 2 ? one : two;
    admitted +=
        which.admit(tokens_demand("route:r", 1000, 100)).outcome == admission::verdict::admitted;
  }
  // Never over the budget; short of it by at most what the other instance
  // holds leased (under one request here).
  EXPECT_LE(admitted, 10);
  EXPECT_GE(admitted, 9);
  EXPECT_EQ(one.admit(tokens_demand("route:r", 1000, 100)).outcome, admission::verdict::refused);
  EXPECT_EQ(two.admit(tokens_demand("route:r", 1000, 100)).outcome, admission::verdict::refused);
}

TEST(RedisBudget, AStoreThatIsDownIsDeniedOrCountedLocallyUntilItIsBack) {
  test::inside_one_minute(10);  // (a few seconds, more under ASan: never two windows)
  test::redis_server redis;
  instance deny(settings_for(redis.port(), config::store_failure_mode::deny));
  auto local_settings = settings_for(redis.port(), config::store_failure_mode::allow_local);
  local_settings.replicas = 2;
  instance local(local_settings);
  // (Requests of half the limit: larger than any lease, so each needs Redis.)
  EXPECT_TRUE(deny.admit(tokens_demand("key:d", 1000, 500)).in_store);
  EXPECT_TRUE(local.admit(tokens_demand("key:e", 1000, 500)).in_store);
  redis.stop();
  auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(deny.admit(tokens_demand("key:d", 1000, 500)).outcome,
            admission::verdict::store_unavailable);
  // allow_local: this instance alone, carrying on from what Redis last
  // said (500 reserved and a lease of 125: 625), with its half (two
  // replicas) of the 375 left: 150 fits, 150 more does not.
  auto a = local.admit(tokens_demand("key:e", 1000, 150));
  EXPECT_EQ(a.outcome, admission::verdict::admitted);
  EXPECT_FALSE(a.in_store);
  EXPECT_EQ(local.admit(tokens_demand("key:e", 1000, 150)).outcome, admission::verdict::refused);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  EXPECT_FALSE(deny.shared.health()->up());
  redis.start();
  std::this_thread::sleep_for(redis::client::retry_after + 100ms);
  // The first call after the pause reconnects; the store answers again.
  bool back = false;
  for (int i = 0; i < 20 && !back; ++i) {
    back = deny.admit(tokens_demand("key:d2", 1000, 100)).in_store;
    if (!back) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(back);
  EXPECT_TRUE(deny.shared.health()->up());
  // Redis came back empty; what the allow_local instance counted alone (150)
  // reaches it before that instance's next reservation there.
  back = false;
  for (int i = 0; i < 20 && !back; ++i) {
    back = local.admit(tokens_demand("key:e2", 1000, 100)).in_store;
    if (!back) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(back);
  EXPECT_FALSE(local.shared.local().has_carry_over());
  // (The instance still holds its lease of 125 from before: a request
  // takes that first and asks Redis for the rest.) 150 + 1000 - 125 > 1000.
  EXPECT_EQ(local.admit(tokens_demand("key:e", 1000, 1000)).outcome, admission::verdict::refused);
  EXPECT_EQ(local.admit(tokens_demand("key:e", 1000, 975)).outcome, admission::verdict::admitted);
}

// A "Redis" that answers every command with a byte outside the protocol.
void answer_garbage(int listener) {
  int fd = ::accept(listener, nullptr, nullptr);
  if (fd < 0) return;
  char buf[4096];
  while (::read(fd, buf, sizeof buf) > 0) (void)!::write(fd, "?garbage\r\n", 10);
  ::close(fd);
}

TEST(RedisBudget, GarbageRepliesCloseTheConnectionNotTheWorker) {
  test::hand_upstream garbage(answer_garbage);
  instance one(settings_for(garbage.port(), config::store_failure_mode::deny));
  EXPECT_EQ(one.admit(tokens_demand("key:g", 1000, 100)).outcome,
            admission::verdict::store_unavailable);
  EXPECT_GE(one.shared.health()->failures(), 1u);
  EXPECT_FALSE(one.shared.health()->up());
}

TEST(RedisBudget, AStoreThatStallsCostsEachRequestItsTimeoutAndNoMore) {
  std::atomic<bool> done{false};
  test::hand_upstream silent([&](int listener) {
    int fd = ::accept(listener, nullptr, nullptr);
    while (!done) std::this_thread::sleep_for(10ms);  // reads nothing, answers nothing
    if (fd >= 0) ::close(fd);
  });
  instance one(settings_for(silent.port(), config::store_failure_mode::deny));
  auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(one.admit(tokens_demand("key:s", 1000, 100)).outcome,
            admission::verdict::store_unavailable);
  auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_GE(waited, 50ms);
  EXPECT_LT(waited, 500ms);
  // The watchdog closes the silent connection; while it is down a request
  // is answered at once.
  std::this_thread::sleep_for(redis::client::stall_after);
  for (int i = 0; i < 50; ++i) {
    if (one.io.stopped()) one.io.restart();
    one.io.run_one_for(10ms);
  }
  started = std::chrono::steady_clock::now();
  EXPECT_EQ(one.admit(tokens_demand("key:s", 1000, 100)).outcome,
            admission::verdict::store_unavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 20ms);
  done = true;
}

}  // namespace
}  // namespace tokengate::budget
