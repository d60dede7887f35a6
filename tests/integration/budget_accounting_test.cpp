// What budgets charge and refuse, through the real proxy and the demo
// engine: a whole (not streamed) answer is billed at the usage it reports,
// in every API and translated, in the budget, the spend and the token
// metrics; a request its budget refuses is refused at once, before the
// fleet's queue; while Redis is away, allow_local carries on from what
// Redis last said, shows it at /budgets, and gives Redis what it counted
// when Redis is back.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <chrono>
#include <thread>

#include "routing/policy.hpp"
#include "support/minute_window.hpp"
#include "support/proxy_fixture.hpp"
#include "support/redis_server.hpp"

namespace tokengate::test::budget_accounting {
namespace {

namespace json = boost::json;

const std::string budget_key = "sk-integration-accounting";
const std::string auth = "Authorization: Bearer " + budget_key + "\r\n";

std::string key_with(const std::string& budget) {
  return "keys:\n"
         "  - name: team\n"
         "    sha256: " +
         routing::sha256_hex(budget_key) + "\n    budget: " + budget + "\n";
}

json::object budgets_page(const proxy_fixture& f) {
  return json::parse(http_get(f.admin_port(), "/budgets").body).as_object();
}

// `used` of the key's counter of `kind` on /budgets (-1 when absent).
double used_of(const json::object& page, std::string_view kind) {
  for (const auto& b : page.at("budgets").as_array()) {
    const auto& o = b.as_object();
    if (o.at("name").as_string() == "team" && o.at("limit").as_string() == kind)
      return o.at("used").is_double() ? o.at("used").as_double()
                                      : static_cast<double>(o.at("used").to_number<long long>());
  }
  return -1;
}

// Sum of tokengate_tokens_total{…type="TYPE"…} on /metrics.
long long tokens_metric(const proxy_fixture& f, std::string_view type) {
  auto page = http_get(f.admin_port(), "/metrics").body;
  long long sum = 0;
  std::string needle = "type=\"" + std::string(type) + "\"";
  for (std::size_t at = page.find("\ntokengate_tokens_total{"); at != std::string::npos;
       at = page.find("\ntokengate_tokens_total{", at + 1)) {
    auto line = page.substr(at + 1, page.find('\n', at + 1) - at - 1);
    if (line.find(needle) != std::string::npos) sum += std::stoll(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

struct whole_usage_seen {
  long long input = 0, output = 0;
};

// One whole answer; the usage the client was told.
// (`knobs`: the demo engine's, as a header: a translated body keeps no
// member the other API lacks.)
whole_usage_seen ask_whole(const proxy_fixture& f, const std::string& path, const std::string& body,
                           const std::string& knobs) {
  http_client c(f.port());
  c.send(post_json(path, body, auth + "x-demo: " + knobs + "\r\n"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 200) << path << ": " << r.body;
  auto usage = json::parse(r.body).as_object().at("usage").as_object();
  auto count = [&](std::string_view a, std::string_view b) {
    auto* v = usage.if_contains(a);
    if (!v) v = usage.if_contains(b);
    return v ? v->to_number<long long>() : 0;
  };
  return {count("input_tokens", "prompt_tokens"), count("output_tokens", "completion_tokens")};
}

TEST(BudgetAccounting, AWholeAnswerIsBilledAtItsUsageInEveryApiAndTranslated) {
  fixture_options o;
  o.more_upstreams =
      "  as_anthropic: {base_url: \"http://127.0.0.1:{engine}/v1\", kind: anthropic}\n"
      "  as_openai: {base_url: \"http://127.0.0.1:{engine}/v1\", kind: openai}\n";
  // (1 USD an input token, 2 an output token: the spend shows each count)
  o.top_extra =
      "routes:\n"
      "  - {name: demo, models: [demo], targets: [{upstream: demo}]}\n"
      "  - {name: claude, models: [claude], targets: [{upstream: as_anthropic}]}\n"
      "  - {name: local, models: [local], targets: [{upstream: as_openai}]}\n"
      "prices:\n"
      "  demo: {input_per_million: 1000000, output_per_million: 2000000}\n"
      "  claude: {input_per_million: 1000000, output_per_million: 2000000}\n"
      "  local: {input_per_million: 1000000, output_per_million: 2000000}\n" +
      key_with("{tokens_per_minute: 100000, usd_per_day: 100000000}");
  proxy_fixture f(o);
  inside_one_minute(20);
  const std::string knobs = R"({"tokens":5,"ttft_ms":0,"interval_ms":0})";
  const std::string hi = R"([{"role":"user","content":"hi"}])";
  const std::vector<std::pair<std::string, std::string>> asks = {
      {"/v1/chat/completions", R"({"model":"demo","max_tokens":1000,"messages":)" + hi + "}"},
      {"/v1/completions", R"({"model":"demo","max_tokens":1000,"prompt":"hi"})"},
      {"/v1/responses", R"({"model":"demo","max_output_tokens":1000,"input":"hi"})"},
      {"/v1/messages", R"({"model":"demo","max_tokens":1000,"messages":)" + hi + "}"},
      // translated both ways
      {"/v1/chat/completions", R"({"model":"claude","max_tokens":1000,"messages":)" + hi + "}"},
      {"/v1/messages", R"({"model":"local","max_tokens":1000,"messages":)" + hi + "}"},
  };
  long long input = 0, output = 0;
  for (const auto& [path, body] : asks) {
    auto seen = ask_whole(f, path, body, knobs);
    EXPECT_EQ(seen.output, 5) << path << " " << body;
    input += seen.input;
    output += seen.output;
    // Settled with that usage, not the 1,000 tokens reserved.
    EXPECT_TRUE(wait_until(
        [&] { return used_of(budgets_page(f), "tokens_per_minute") == double(input + output); }, 2s,
        "the budget to show " + std::to_string(input + output) + " after " + path));
  }
  EXPECT_DOUBLE_EQ(used_of(budgets_page(f), "usd_per_day"), double(input + 2 * output));
  // (The metrics record an exchange once it has ended, which may be a
  // moment after the budget settled it.)
  EXPECT_TRUE(wait_until([&] { return tokens_metric(f, "output") == output; }, 2s,
                         "the output tokens metric to show " + std::to_string(output)));
  EXPECT_EQ(tokens_metric(f, "output"), output);
  EXPECT_EQ(tokens_metric(f, "input"), input);
}

// A resumed stream: the client is told one answer's usage; the budget
// settles what every attempt cost upstream (the cut one sent the prompt
// and generated 5 tokens before its reset).
TEST(BudgetAccounting, AResumedStreamSettlesWhatEachAttemptCost) {
  fixture_options o;
  o.top_extra =
      "routes:\n"
      "  - {name: demo, models: [demo], targets: [{upstream: demo}], retry_backoff: 1ms,\n"
      "     resume: {mode: restart}}\n" +
      key_with("{tokens_per_minute: 100000}");
  proxy_fixture f(o);
  inside_one_minute(10);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"demo","stream":true,"stream_options":{"include_usage":true},)"
                   R"("max_tokens":1000,"messages":[{"role":"user","content":"hi"}]})",
                   auth + R"(x-demo: {"tokens":12,"ttft_ms":0,"interval_ms":1,"reset_after":5,)"
                          R"("fail_times":1})"
                          "\r\n"));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  auto at = r.body.rfind("\"usage\":");
  ASSERT_NE(at, std::string::npos) << r.body;
  auto usage = json::parse(r.body.substr(at + 8, r.body.find('}', at) - at - 7)).as_object();
  EXPECT_EQ(usage.at("completion_tokens").to_number<long long>(), 12);
  auto prompt = usage.at("prompt_tokens").to_number<long long>();
  EXPECT_TRUE(wait_until(
      [&] { return used_of(budgets_page(f), "tokens_per_minute") == double(2 * prompt + 12 + 5); },
      2s, "the budget to show both attempts"))
      << used_of(budgets_page(f), "tokens_per_minute");
}

TEST(BudgetAccounting, ABudgetRefusalOnAFullFleetIsA429AtOnceNotAQueuePlace) {
  fixture_options o;
  o.upstream_extra = "    capacity: {max_streams: 1}\n";
  o.top_extra =
      "routes:\n"
      "  - {name: chat, models: ['*'], targets: [{upstream: demo}],\n"
      "     queue: {max_waiting: 8, timeout: 5s}}\n" +
      key_with("{tokens_per_minute: 2000}") +
      "  - name: other\n    sha256: " + routing::sha256_hex("sk-other") + "\n";
  proxy_fixture f(o);
  inside_one_minute(15);
  // Another key holds the one slot for a while.
  std::thread holder([&] {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions",
                     R"({"model":"demo","max_tokens":5,"messages":[],"demo":{"ttft_ms":1500}})",
                     "Authorization: Bearer sk-other\r\n"));
    read_response(c);
  });
  ASSERT_TRUE(wait_until([&] { return f.engine_stats().requests.load() == 1; }, 2s,
                         "the holder to reach the engine"));
  // More than the key's whole budget: refused by the budget, at once.
  auto started = std::chrono::steady_clock::now();
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","max_tokens":3000,"messages":[]})",
                   auth));
  auto r = read_response(c);
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_NE(r.body.find("rate_limit_exceeded"), std::string::npos) << r.body;
  EXPECT_TRUE(r.headers.contains("retry-after"));
  // (Checked after the queue: it would have waited 5 s, then 503.)
  EXPECT_LT(took, 500ms);
  holder.join();
}

TEST(BudgetAccounting, AFleetRefusalGivesTheReservationBackWhole) {
  fixture_options o;
  o.upstream_extra = "    capacity: {max_streams: 1}\n";
  o.top_extra =
      "routes:\n"
      "  - {name: chat, models: ['*'], targets: [{upstream: demo}],\n"
      "     queue: {max_waiting: 8, timeout: 200ms}}\n" +
      key_with("{requests_per_minute: 100, tokens_per_minute: 100000}");
  proxy_fixture f(o);
  inside_one_minute(15);
  std::thread holder([&] {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions",
                     R"({"model":"demo","max_tokens":5,"messages":[],"demo":{"ttft_ms":1000}})",
                     auth));
    read_response(c);
  });
  ASSERT_TRUE(wait_until([&] { return f.engine_stats().requests.load() == 1; }, 2s,
                         "the holder to reach the engine"));
  http_client c(f.port());
  c.send(
      post_json("/v1/chat/completions", R"({"model":"demo","max_tokens":50,"messages":[]})", auth));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("queue_timeout"), std::string::npos) << r.body;
  EXPECT_TRUE(r.headers.contains("x-ratelimit-remaining-tokens"));
  holder.join();
  // Only the holder is counted: one request, its real tokens.
  EXPECT_TRUE(wait_until([&] { return used_of(budgets_page(f), "requests_per_minute") == 1; }, 2s,
                         "one request counted"));
  EXPECT_LT(used_of(budgets_page(f), "tokens_per_minute"), 50);
}

// Redis dies mid-window under allow_local: the instance carries on from
// the count Redis last gave it, not from zero, shows it at /budgets as
// local, and adds what it counted to Redis when Redis is back.
TEST(BudgetAccounting, AllowLocalCarriesOnFromRedisAndGivesItBack) {
  redis_server redis;
  fixture_options o;
  o.top_extra = "routes:\n  - {name: chat, models: ['*'], targets: [{upstream: demo}]}\n" +
                key_with("{tokens_per_minute: 1000}") + "redis: {url: \"" + redis.url() +
                "\", timeout: 300ms, on_store_failure: allow_local}\n";
  proxy_fixture f(o);
  inside_one_minute(25);
  // Each request reserves its estimate (body / 4 + 100) and uses about 101.
  const std::string body =
      R"({"model":"demo","max_tokens":100,"messages":[{"role":"user","content":"hi"}],)"
      R"("demo":{"tokens":100,"ttft_ms":0,"interval_ms":0}})";
  long long used_tokens = 0;
  auto ask = [&] {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions", body, auth));
    auto r = read_response(c);
    if (r.status == 200) {
      auto u = json::parse(r.body).as_object().at("usage").as_object();
      used_tokens += u.at("total_tokens").to_number<long long>();
    }
    return r.status;
  };
  for (int i = 0; i < 4; ++i) ASSERT_EQ(ask(), 200) << i;
  const long long before_outage = used_tokens;

  redis.stop();
  int admitted_alone = 0;
  for (int i = 0; i < 10; ++i) {
    auto status = ask();
    if (status != 200) {
      EXPECT_EQ(status, 429);
      break;
    }
    ++admitted_alone;
  }
  // From zero it would have admitted 1000 / 132 = 7 more, 1,100 tokens in
  // all; from what Redis said (four requests, an estimate, this
  // instance's lease) it stays within the limit, and still serves.
  EXPECT_GE(admitted_alone, 2);
  EXPECT_LE(used_tokens, 1000) << before_outage << " before the outage, " << admitted_alone
                               << " admitted alone";
  EXPECT_GT(metric(f, "tokengate_budget_local_fallbacks_total"), 0u);
  // /budgets shows the local view, not an empty list.
  auto page = budgets_page(f);
  EXPECT_EQ(page.at("view").as_string(), "local");
  EXPECT_FALSE(page.at("store_up").as_bool());
  EXPECT_GE(used_of(page, "tokens_per_minute"), double(before_outage));

  // Redis is back, empty (it kept nothing): the next request carries what
  // was counted alone there first. Without it Redis would hold that
  // request's 101 tokens and a lease of at most 125.
  redis.start();
  std::this_thread::sleep_for(1200ms);  // (a lost connection is retried every second)
  const long long alone = used_tokens - before_outage;
  ASSERT_EQ(ask(), 200);
  const long long after = used_tokens - before_outage;  // (alone, and this request)
  EXPECT_TRUE(wait_until(
      [&] {
        auto p = budgets_page(f);
        return p.at("view").as_string() == "store" &&
               used_of(p, "tokens_per_minute") >= double(after);
      },
      3s, "Redis to count the " + std::to_string(alone) + " tokens admitted alone"));
}

}  // namespace
}  // namespace tokengate::test::budget_accounting
