// Budgets through the real proxy (two workers sharing one budget): many
// clients at once never get past a limit, in this process's ledger or in
// a real Redis; a concurrency limit gives its slots back when streams end.
// (Run under ThreadSanitizer too: the workers share the ledger, the
// leases and the metrics board.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "routing/policy.hpp"
#include "support/minute_window.hpp"
#include "support/proxy_fixture.hpp"
#include "support/redis_server.hpp"

namespace tokengate::test {
namespace {

const std::string budget_key = "sk-integration-budget";

fixture_options budgeted_options(const std::string& budget, const std::string& more = "") {
  fixture_options o;
  o.top_extra =
      "routes:\n"
      "  - {name: chat, models: ['*'], targets: [{upstream: demo}]}\n"
      "keys:\n"
      "  - name: team\n"
      "    sha256: " +
      routing::sha256_hex(budget_key) + "\n    budget: " + budget + "\n" + more;
  return o;
}

// `clients` requests at once; the statuses they got.
std::vector<int> budget_burst(proxy_fixture& f, int clients, const std::string& body) {
  std::vector<int> statuses(clients);
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i)
    threads.emplace_back([&, i] {
      http_client c(f.port());
      c.send(
          post_json("/v1/chat/completions", body, "Authorization: Bearer " + budget_key + "\r\n"));
      statuses[i] = read_response(c).status;
    });
  for (auto& t : threads) t.join();
  return statuses;
}

const std::string budget_chat =
    R"({"model":"demo","max_tokens":2,"messages":[{"role":"user","content":"hi"}]})";

TEST(Budgets, ManyClientsAtOnceNeverPassAProcesssLimit) {
  proxy_fixture f(budgeted_options("{requests_per_minute: 12}"));
  inside_one_minute(9);  // (the whole burst in one window)
  auto statuses = budget_burst(f, 32, budget_chat);
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 200), 12);
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 429), 20);
  EXPECT_EQ(f.engine_stats().requests.load(), 12u);
}

TEST(Budgets, ManyClientsAtOnceNeverPassALimitKeptInRedis) {
  redis_server redis;
  proxy_fixture f(budgeted_options("{requests_per_minute: 12, tokens_per_minute: 100000}",
                                   "redis: {url: \"" + redis.url() + "\", timeout: 500ms}\n"));
  inside_one_minute(9);  // (the whole burst in one window)
  auto statuses = budget_burst(f, 32, budget_chat);
  auto admitted = std::count(statuses.begin(), statuses.end(), 200);
  EXPECT_LE(admitted, 12);
  EXPECT_GE(admitted, 11);  // (one process: its own lease is never lost to it)
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 429), 32 - admitted);
  EXPECT_EQ(metric(f, "tokengate_budget_store_failures_total"), 0u);
}

TEST(Budgets, AConcurrencyLimitGivesItsSlotsBackWhenStreamsEnd) {
  proxy_fixture f(budgeted_options("{concurrent_streams: 3}"));
  const std::string slow =
      R"({"model":"demo","stream":true,"max_tokens":5,"messages":[],"demo":{"ttft_ms":300}})";
  auto statuses = budget_burst(f, 6, slow);
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 200), 3);
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 429), 3);
  // All ended: three slots free again.
  statuses = budget_burst(f, 3, budget_chat);
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 200), 3);
}

}  // namespace
}  // namespace tokengate::test
