// What the metrics report, against a demo engine with known timing.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "metrics/cpu_wait.hpp"
#include "stream/observer.hpp"
#include "support/observed.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

namespace json = boost::json;

fixture_options routed() {
  fixture_options o;
  o.top_extra = "routes:\n  - {name: chat, models: [demo], targets: [{upstream: demo}]}\n";
  return o;
}

// A streamed request through the proxy, read to its end: what the client
// saw.
stream::stream_facts streamed(const proxy_fixture& f, const std::string& path,
                              const std::string& body) {
  http_client c(f.port());
  c.send(post_json(path, body));
  auto r = read_response(c);
  EXPECT_TRUE(r.complete) << path;
  return observed(r.body, dialect_for_path(path));
}

// The value of one sample line in the exposition, or -1.
double sample(const std::string& metrics, const std::string& prefix) {
  auto pos = metrics.find("\n" + prefix + " ");
  if (pos == std::string::npos) return -1;
  return std::stod(metrics.substr(pos + prefix.size() + 2));
}

// The labels of the demo route's series (routed()).
constexpr const char* demo_route = R"(route="chat",model="demo",upstream="demo")";

// One of the demo route's samples, `name{route's labels, extra}`, or -1.
double demo_sample(const std::string& metrics, const std::string& name,
                   const std::string& extra = "") {
  return sample(metrics, name + "{" + demo_route + extra + "}");
}

// The metrics page once `successes` requests of the demo route are counted
// as successes (a request is recorded just after its last byte is
// written); empty if they are not within 2 s.
std::string metrics_after_successes(const proxy_fixture& f, double successes) {
  std::string metrics;
  bool counted = wait_until(
      [&] {
        metrics = http_get(f.admin_port(), "/metrics").body;
        return sample(metrics, std::string("tokengate_requests_total{") + demo_route +
                                   ",outcome=\"success\"}") == successes;
      },
      2s, "the requests to be counted as successes");
  return counted ? metrics : std::string();
}

TEST(Accounting, KnownTimingIsReportedWithinMilliseconds) {
  proxy_fixture f(routed());
  for (int i = 0; i < 3; ++i) {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions",
                     R"({"model":"demo","stream":true,"messages":[{"role":"user","content":")" +
                         std::string(400, 'x') +
                         R"("}],"demo":{"ttft_ms":120,"interval_ms":30,"tokens":8}})"));
    ASSERT_TRUE(read_response(c).complete);
  }
  // A request is recorded just after its last byte is written: wait for the third.
  json::object stats;
  ASSERT_TRUE(wait_until(
      [&] {
        auto all = json::parse(http_get(f.admin_port(), "/stats").body).at("routes").as_object();
        if (!all.contains("chat")) return false;
        stats = all.at("chat").as_object();
        return stats.at("duration_us").at("since_start").at("count").to_number<std::uint64_t>() ==
               3;
      },
      2s, "three requests to be recorded"));
  auto at = [&](const char* metric, const char* field) {
    return static_cast<double>(
               stats.at(metric).at("since_start").at(field).to_number<std::int64_t>()) /
           1000.0;
  };
  EXPECT_EQ(stats.at("ttft_us").at("since_start").at("count").to_number<std::uint64_t>(), 3u);
  EXPECT_NEAR(at("ttft_us", "p50"), 120, 10);
  EXPECT_NEAR(at("inter_token_us", "p50"), 30, 5);
  EXPECT_NEAR(at("time_per_output_token_us", "p50"), 30, 5);
  EXPECT_NEAR(at("duration_us", "p50"), 120 + 7 * 30, 20);
  EXPECT_EQ(stats.at("inter_token_us").at("last_1m").at("count").to_number<std::uint64_t>(),
            3u * 7);
  // Tokens 30 ms apart arrive in reads of their own: each read's time in
  // the proxy is measured (arrival in the kernel to the write), and it is a
  // small part of the gap.
  EXPECT_GE(stats.at("relay_delay_us").at("since_start").at("count").to_number<std::uint64_t>(),
            3u * 7);
  EXPECT_LT(at("relay_delay_us", "p99"), 15);

  auto metrics = http_get(f.admin_port(), "/metrics").body;
  // Exact counts: 8 output tokens each, input as the engine estimated it (400 bytes / 4 + 1).
  EXPECT_EQ(demo_sample(metrics, "tokengate_tokens_total", ",type=\"output\""), 24);
  EXPECT_EQ(demo_sample(metrics, "tokengate_tokens_total", ",type=\"input\""), 3 * 101);
  EXPECT_EQ(demo_sample(metrics, "tokengate_requests_total", ",outcome=\"success\""), 3);
  EXPECT_EQ(demo_sample(metrics, "tokengate_time_to_first_token_seconds_count"), 3);
  EXPECT_EQ(demo_sample(metrics, "tokengate_inter_token_latency_seconds_count"), 21);
  auto delays = demo_sample(metrics, "tokengate_relay_delay_seconds_count");
  EXPECT_GE(delays, 21);
  EXPECT_EQ(demo_sample(metrics, "tokengate_relay_delay_seconds_bucket", ",le=\"0.025\""), delays);
  // All three TTFTs (~120 ms) fall between the 0.1 and 0.25 bucket bounds.
  EXPECT_EQ(demo_sample(metrics, "tokengate_time_to_first_token_seconds_bucket", ",le=\"0.1\""), 0);
  EXPECT_EQ(demo_sample(metrics, "tokengate_time_to_first_token_seconds_bucket", ",le=\"0.25\""),
            3);
}

// An agent's stream is mostly a tool call's arguments, a fragment per
// token: the proxy times and counts those events as it does text (read by
// its lean readers), for OpenAI and Anthropic alike, and passes them on
// whole.
TEST(Accounting, ToolCallStreamsAreTimedAndCountedLikeText) {
  proxy_fixture f(routed());
  const std::string knobs = R"("demo":{"ttft_ms":40,"interval_ms":15,"tokens":6,"tool_call":true})";
  for (const std::string path : {"/v1/chat/completions", "/v1/messages"}) {
    http_client c(f.port());
    c.send(post_json(
        path,
        R"({"model":"demo","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}],)" +
            knobs + "}"));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete) << path;
    auto facts = observed(r.body, dialect_for_path(path));
    ASSERT_EQ(facts.tool_calls.size(), 1u) << path;
    EXPECT_EQ(facts.tool_calls[0].name, "demo_tool") << path;
    auto arguments = json::parse(facts.tool_calls[0].arguments);
    EXPECT_EQ(arguments.at("text").as_string(), "The quick brown fox jumps over") << path;
    EXPECT_EQ(facts.tool_call_events, 7u) << path << ": the call's name, then six fragments";
    EXPECT_EQ(facts.text_events, 0u) << path;
    EXPECT_EQ(facts.finish_reason, path == "/v1/messages" ? "tool_use" : "tool_calls");
  }
  auto metrics = metrics_after_successes(f, 2);
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(demo_sample(metrics, "tokengate_tokens_total", ",type=\"output\""), 12);
  EXPECT_EQ(demo_sample(metrics, "tokengate_time_to_first_token_seconds_count"), 2);
  // Each stream's gaps between content events: from the name (written
  // with the first fragment) through the sixth fragment, 15 ms apart.
  EXPECT_EQ(demo_sample(metrics, "tokengate_inter_token_latency_seconds_count"), 12);
}

// OpenAI's Responses API names everything its own way (typed events, no
// [DONE], usage as input_tokens/output_tokens in response.completed, a
// status for a finish reason): the proxy times and counts it as it does chat.
TEST(Accounting, ResponsesApiStreamsAreTimedAndCountedLikeChat) {
  proxy_fixture f(routed());
  auto facts = streamed(f, "/v1/responses",
                        R"({"model":"demo","stream":true,"max_output_tokens":5,"input":")" +
                            std::string(400, 'x') +
                            R"(","demo":{"ttft_ms":40,"interval_ms":15,"tokens":9}})");
  EXPECT_EQ(facts.text_by_choice[0], "The quick brown fox jumps");
  EXPECT_EQ(facts.text_events, 5u);
  EXPECT_EQ(facts.finish_reason, "incomplete") << "stopped at max_output_tokens";
  EXPECT_EQ(facts.terminator, "event: response.incomplete");
  EXPECT_EQ(facts.output_tokens, 5);
  EXPECT_FALSE(facts.error);

  auto metrics = metrics_after_successes(f, 1);
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(demo_sample(metrics, "tokengate_tokens_total", ",type=\"output\""), 5);
  EXPECT_EQ(demo_sample(metrics, "tokengate_tokens_total", ",type=\"input\""),
            101);  // 400 bytes / 4 + 1
  EXPECT_EQ(demo_sample(metrics, "tokengate_inter_token_latency_seconds_count"), 4);
  // The first token came after the engine's 40 ms.
  EXPECT_EQ(demo_sample(metrics, "tokengate_time_to_first_token_seconds_bucket", ",le=\"0.02\""),
            0);
  EXPECT_EQ(demo_sample(metrics, "tokengate_time_to_first_token_seconds_bucket", ",le=\"0.1\""), 1);
}

// A reasoning model thinks before it answers, in chunks of their own
// (delta.reasoning_content): its first token is its first thought, and
// its thoughts count against max_tokens and in the output tokens.
TEST(Accounting, AReasoningModelsThinkingIsItsFirstTokens) {
  proxy_fixture f(routed());
  auto facts = streamed(
      f, "/v1/chat/completions",
      R"({"model":"demo","stream":true,"max_tokens":6,"messages":[{"role":"user","content":"why"}],)"
      R"("demo":{"ttft_ms":40,"interval_ms":15,"tokens":9,"reasoning_tokens":4}})");
  EXPECT_EQ(facts.reasoning_text, "The quick brown fox");
  EXPECT_EQ(facts.text_by_choice[0], " jumps over");
  EXPECT_EQ(facts.reasoning_events, 4u);
  EXPECT_EQ(facts.text_events, 2u);
  EXPECT_EQ(facts.first_content_event, 1u) << "the first thought, after the role chunk";
  EXPECT_EQ(facts.finish_reason, "length");
  EXPECT_TRUE(facts.ended_properly());

  auto metrics = metrics_after_successes(f, 1);
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(demo_sample(metrics, "tokengate_tokens_total", ",type=\"output\""), 6);
  EXPECT_EQ(demo_sample(metrics, "tokengate_inter_token_latency_seconds_count"), 5);
  EXPECT_EQ(demo_sample(metrics, "tokengate_time_to_first_token_seconds_bucket", ",le=\"0.02\""),
            0);
  EXPECT_EQ(demo_sample(metrics, "tokengate_time_to_first_token_seconds_bucket", ",le=\"0.1\""), 1);
}

// vLLM asked for continuous_usage_stats reports the tokens so far in every
// chunk. When the proxy cuts a stream whose engine ignored max_tokens, no
// final usage chunk comes: the count recorded is that of the last chunk
// the client got (not of the one cut off), read from that chunk's own
// digits even where the chunk is read from memory.
TEST(Accounting, UsageInEveryChunkCountsAStreamCutShort) {
  proxy_fixture f(routed());
  auto facts = streamed(
      f, "/v1/chat/completions",
      R"({"model":"demo","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}],)"
      R"("stream_options":{"include_usage":true,"continuous_usage_stats":true},)"
      R"("demo":{"tokens":40,"interval_ms":5,"ignore_limit":true}})");
  EXPECT_EQ(facts.content_events, 5u);
  EXPECT_EQ(facts.usage_events, 5u) << "one in each token chunk";
  EXPECT_EQ(facts.output_tokens, 5);
  EXPECT_EQ(facts.finish_reason, "length");
  EXPECT_TRUE(facts.ended_properly());

  auto metrics = metrics_after_successes(f, 1);
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(demo_sample(metrics, "tokengate_tokens_total", ",type=\"output\""), 5);
}

TEST(Accounting, UsageIsAskedForButOnlyTheAskingClientSeesIt) {
  proxy_fixture f(routed());
  {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":4})"));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete);
    auto facts = observed(r.body);
    EXPECT_EQ(facts.usage_events, 0u) << "a client that did not ask gets no usage chunk";
    EXPECT_TRUE(facts.ended_properly());
    EXPECT_EQ(r.body.find("\"usage\""), std::string::npos);
    auto sent = json::parse(f.engine_last_request().at("body").as_string());
    EXPECT_TRUE(sent.at("stream_options").at("include_usage").as_bool())
        << "but the upstream was asked";
  }
  {
    http_client c(f.port());
    c.send(post_json(
        "/v1/chat/completions",
        R"({"model":"demo","stream":true,"max_tokens":4,"stream_options":{"include_usage":true}})"));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete);
    auto facts = observed(r.body);
    EXPECT_EQ(facts.usage_events, 1u) << "the client that asked gets exactly one";
    EXPECT_EQ(facts.output_tokens, 4);
  }
  {
    // vLLM sends usage in every chunk only with include_usage on too: a
    // client asking for continuous stats alone gets none, through the proxy
    // as directly.
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions",
                     R"({"model":"demo","stream":true,"max_tokens":4,)"
                     R"("stream_options":{"continuous_usage_stats":true}})"));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete);
    EXPECT_EQ(observed(r.body).usage_events, 0u);
    EXPECT_EQ(r.body.find("\"usage\""), std::string::npos);
    auto options = json::parse(f.engine_last_request().at("body").as_string()).at("stream_options");
    EXPECT_TRUE(options.at("include_usage").as_bool());
    EXPECT_FALSE(options.at("continuous_usage_stats").as_bool());
  }
  EXPECT_TRUE(wait_until(
      [&] {
        return sample(
                   http_get(f.admin_port(), "/metrics").body,
                   R"(tokengate_tokens_total{route="chat",model="demo",upstream="demo",type="output"})") ==
               12;
      },
      2s, "the three requests' output tokens to be counted"));
}

TEST(Accounting, OutcomesAreCountedByKind) {
  proxy_fixture f(routed());
  {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions", R"({"model":"nope"})"));
    read_response(c);
  }
  {
    http_client c(f.port());
    c.send(post_json(
        "/v1/chat/completions",
        R"({"model":"demo","stream":true,"demo":{"tokens":5,"interval_ms":5,"reset_after":2}})"));
    read_response(c);
  }
  {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions",
                     R"({"model":"demo","stream":true,"demo":{"tokens":500,"interval_ms":10}})"));
    ASSERT_TRUE(wait_until(
        [&] {
          c.read_some(10ms);
          return c.raw().find("\"content\":\"The\"") != std::string::npos;
        },
        3s, "a token"));
    c.close();
  }
  ASSERT_TRUE(wait_until(
      [&] {
        return sample(
                   http_get(f.admin_port(), "/metrics").body,
                   R"(tokengate_requests_total{route="chat",model="demo",upstream="demo",outcome="cancelled"})") ==
               1;
      },
      2s, "the cancellation to be counted"));
  EXPECT_TRUE(wait_until(
      [&] {
        auto metrics = http_get(f.admin_port(), "/metrics").body;
        return sample(
                   metrics,
                   R"(tokengate_requests_total{route="none",model="none",upstream="",outcome="client_error"})") ==
                   1 &&
               sample(
                   metrics,
                   R"(tokengate_requests_total{route="chat",model="demo",upstream="demo",outcome="stream_failed"})") ==
                   1;
      },
      2s, "the 404 and the failed stream to be counted"));
}

TEST(Accounting, ExpositionPassesPromtool) {
  proxy_fixture f(routed());
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":3})"));
  ASSERT_TRUE(read_response(c).complete);
  auto metrics = http_get(f.admin_port(), "/metrics").body;
  auto path = testing::TempDir() + "tokengate-metrics.txt";
  std::ofstream(path) << metrics;
  ASSERT_EQ(std::system("command -v promtool > /dev/null"), 0)
      << "promtool missing: run scripts/setup";
  auto rc = std::system(("promtool check metrics < " + path + " > " + path + ".out 2>&1").c_str());
  std::ifstream out(path + ".out");
  std::string report((std::istreambuf_iterator<char>(out)), {});
  EXPECT_EQ(rc, 0) << report;
  EXPECT_NE(metrics.find("# TYPE tokengate_time_to_first_token_seconds histogram"),
            std::string::npos);
}

// The run-queue wait on /metrics is this process's own, read at the scrape
// (the fixture's proxy runs in the test's process): between what the
// process's threads had waited just before the scrape and just after.
TEST(Accounting, CpuWaitOnTheMetricsPageIsReadAtTheScrape) {
  proxy_fixture f(routed());
  auto before = metrics::read_cpu_wait_ns();
  if (!before) GTEST_SKIP() << "no schedstat in this kernel";
  auto metrics_page = http_get(f.admin_port(), "/metrics").body;
  auto after = metrics::read_cpu_wait_ns();
  ASSERT_TRUE(after);
  double seen = sample(metrics_page, "tokengate_cpu_wait_seconds_total");
  ASSERT_GE(seen, 0) << metrics_page;
  // (Printed to the microsecond.)
  EXPECT_GE(seen, static_cast<double>(*before) / 1e9 - 1e-6);
  EXPECT_LE(seen, static_cast<double>(*after) / 1e9 + 1e-6);
}

}  // namespace
}  // namespace tokengate::test
