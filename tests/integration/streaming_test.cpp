// Streams through the real proxy to the real demo engine over real sockets.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "engine/demo_text.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

// Offsets in `raw` of every token-carrying chat delta, in order.
std::vector<std::size_t> token_offsets(const std::string& raw) {
  std::vector<std::size_t> out;
  const std::string marker = "\"delta\":{\"content\":\"";
  for (auto pos = raw.find(marker); pos != std::string::npos; pos = raw.find(marker, pos + 1))
    out.push_back(pos);
  return out;
}

TEST(Streaming, TokensArriveSpreadOutNotBuffered) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}],)"
                   R"("demo":{"tokens":20,"interval_ms":50,"ttft_ms":20}})"));
  auto r = read_response(c, 10s);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  EXPECT_EQ(r.headers["cache-control"], "no-cache");
  EXPECT_EQ(r.headers["x-accel-buffering"], "no");
  EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
  EXPECT_EQ(r.headers["x-request-id"].size(), 32u);

  auto offsets = token_offsets(c.raw());
  ASSERT_EQ(offsets.size(), 20u);
  std::vector<double> gaps_ms;
  for (std::size_t i = 1; i < offsets.size(); ++i)
    gaps_ms.push_back(std::chrono::duration<double, std::milli>(c.arrival_of(offsets[i]) -
                                                                c.arrival_of(offsets[i - 1]))
                          .count());
  auto span = std::chrono::duration<double, std::milli>(c.arrival_of(offsets.back()) -
                                                        c.arrival_of(offsets.front()))
                  .count();
  // 19 gaps of 50 ms: a buffering proxy delivers them together at the end.
  EXPECT_GE(span, 19 * 50 * 0.9) << "tokens arrived bunched together";
  int spread = 0;
  for (double g : gaps_ms) spread += g >= 30;
  EXPECT_GE(spread, 17) << "most gaps must be close to the 50 ms the engine waits";
  EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos);
}

TEST(Streaming, TheHeadDoesNotWaitForTheFirstToken) {
  // The client's head leaves with the first events when they come with the
  // upstream's head, but not later than the upstream's head: with a slow
  // first token (a long prefill) the client sees the response begin at once.
  proxy_fixture f;
  http_client c(f.port());
  auto sent = std::chrono::steady_clock::now();
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}],)"
                   R"("demo":{"tokens":2,"interval_ms":10,"ttft_ms":400}})"));
  auto r = read_response(c, 10s);
  ASSERT_TRUE(r.complete);
  auto first_event = c.raw().find("data: ");
  ASSERT_NE(first_event, std::string::npos);
  auto ms = [&](auto t) { return std::chrono::duration<double, std::milli>(t - sent).count(); };
  EXPECT_LT(ms(c.arrival_of(0)), 200) << "the head waited for the first token";
  EXPECT_GE(ms(c.arrival_of(first_event)), 380) << "the engine's first token came early";
}

TEST(Streaming, NonStreamingAnswerKeepsItsLength) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(
      post_json("/v1/chat/completions",
                R"({"model":"demo","max_tokens":3,"messages":[{"role":"user","content":"hi"}]})"));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-length"], std::to_string(r.body.size()));
  auto v = boost::json::parse(r.body);
  EXPECT_EQ(v.at("choices").at(0).at("message").at("content").as_string(), "The quick brown");
  EXPECT_EQ(v.at("choices").at(0).at("finish_reason").as_string(), "length");
}

TEST(Streaming, KeepAliveConnectionsAreReusedOnBothSides) {
  proxy_fixture f;
  http_client c(f.port());
  for (int i = 0; i < 5; ++i) {
    c.send(post_json("/v1/chat/completions",
                     R"({"model":"demo","stream":true,"max_tokens":2,"messages":[]})"));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete) << "request " << i;
    EXPECT_EQ(r.status, 200);
    c.clear();
  }
  auto metrics = http_get(f.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("tokengate_downstream_cx_total 1\n"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("tokengate_upstream_cx_reused_total 0\n"), std::string::npos) << metrics;
}

// A hosted provider's head (two dozen fields, cookies among them, and its
// Connection: keep-alive) reaches the client with every end-to-end field in
// its order, none of the upstream's connection fields, and our framing and
// request id; the upstream's connection is kept for the next request.
TEST(Streaming, AProvidersHeadReachesTheClientWithoutItsConnectionFields) {
  proxy_fixture f;
  http_client c(f.port());
  for (int i = 0; i < 3; ++i) {
    c.send(post_json(
        "/v1/chat/completions",
        R"({"model":"demo","stream":true,"max_tokens":2,"demo":{"ttft_ms":0,"provider_head":true}})"));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete) << "request " << i;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.headers["content-type"], "text/event-stream; charset=utf-8");
    EXPECT_EQ(r.headers["openai-processing-ms"], "187");
    EXPECT_EQ(r.headers["x-ratelimit-remaining-tokens"], "29999985");
    EXPECT_EQ(r.headers["cf-ray"], "8e0123456789abcd-AMS");
    EXPECT_EQ(r.headers["alt-svc"], "h3=\":443\"; ma=86400");
    EXPECT_EQ(r.headers.count("connection"), 0u);
    EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
    EXPECT_EQ(r.headers["x-request-id"].size(), 32u)
        << "the upstream's own request id went through";
    auto head = c.raw().substr(0, r.body_offset);
    std::size_t cookies = 0;
    for (auto at = head.find("\r\nSet-Cookie: "); at != std::string::npos;
         at = head.find("\r\nSet-Cookie: ", at + 1))
      ++cookies;
    EXPECT_EQ(cookies, 2u) << head;
    EXPECT_LT(head.find("__cf_bm="), head.find("_cfuvid=")) << "the fields' order changed";
    EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos);
    c.clear();
  }
  auto metrics = http_get(f.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("tokengate_upstream_cx_reused_total 2\n"), std::string::npos) << metrics;
}

TEST(Streaming, RequestIdIsKeptOrMadeAndSentBothWays) {
  proxy_fixture f;
  {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions", R"({"model":"demo","max_tokens":1})",
                     "X-Request-Id: trace-abc-123\r\n"));
    auto r = read_response(c);
    EXPECT_EQ(r.headers["x-request-id"], "trace-abc-123");
    EXPECT_EQ(f.engine_last_request().at("headers").at("x-request-id").as_string(),
              "trace-abc-123");
  }
  {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions", R"({"model":"demo","max_tokens":1})"));
    auto r = read_response(c);
    auto id = r.headers["x-request-id"];
    EXPECT_EQ(id.size(), 32u);
    EXPECT_EQ(f.engine_last_request().at("headers").at("x-request-id").as_string(), id);
  }
}

TEST(Streaming, UpstreamKeyReplacesClientCredentialsAndIsNeverEchoed) {
  ::setenv("TG_TEST_UPSTREAM_KEY", "sk-upstream-secret-42", 1);
  fixture_options o;
  o.upstream_extra = "    api_key: ${TG_TEST_UPSTREAM_KEY}\n";
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":2})",
                   "Authorization: Bearer client-virtual-key\r\n"));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  auto headers = f.engine_last_request().at("headers").as_object();
  EXPECT_EQ(headers.at("Authorization").as_string(), "Bearer sk-upstream-secret-42");
  EXPECT_EQ(c.raw().find("sk-upstream-secret-42"), std::string::npos);
}

TEST(Streaming, AnthropicMessagesStreamEndToEnd) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json(
      "/v1/messages",
      R"({"model":"demo","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]})",
      "anthropic-version: 2023-06-01\r\n"));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  EXPECT_NE(r.body.find("event: message_start"), std::string::npos);
  EXPECT_NE(r.body.find("\"stop_reason\":\"max_tokens\""), std::string::npos);
  EXPECT_NE(r.body.find("event: message_stop"), std::string::npos);
  EXPECT_EQ(f.engine_last_request().at("headers").at("anthropic-version").as_string(),
            "2023-06-01");
}

TEST(Streaming, ModelsAndEmbeddingsPassThrough) {
  proxy_fixture f;
  auto models = http_get(f.port(), "/v1/models");
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(boost::json::parse(models.body).at("data").at(0).at("id").as_string(), "demo");
  http_client c(f.port());
  c.send(post_json("/v1/embeddings", R"({"model":"demo","input":"hello world"})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(boost::json::parse(r.body).at("data").at(0).at("embedding").as_array().size(), 8u);
}

}  // namespace
}  // namespace tokengate::test

namespace tokengate::test {
namespace {

TEST(Streaming, PipelinedRequestsAreAnsweredInOrder) {
  proxy_fixture f;
  http_client c(f.port());
  // Three requests in one write: the proxy must keep the bytes that arrive
  // while it relays the first answer.
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","max_tokens":1})") +
         post_json("/v1/chat/completions", R"({"model":"demo","max_tokens":2})") +
         post_json("/v1/chat/completions", R"({"model":"demo","max_tokens":3})"));
  for (int expected_tokens = 1; expected_tokens <= 3; ++expected_tokens) {
    auto r = read_response(c);
    ASSERT_TRUE(r.complete) << "response " << expected_tokens;
    EXPECT_EQ(boost::json::parse(r.body).at("usage").at("completion_tokens").as_int64(),
              expected_tokens);
    c.consume(r.body_offset + r.body.size());
  }
}

// The read that watched the client during a response goes on as the wait
// for the next request (io/client_watcher.hpp): a request that comes
// later, larger than that read's buffer and in pieces, is read whole.
TEST(Streaming, TheNextRequestIsReadWholeWhateverItsSizeAndPace) {
  proxy_fixture f;
  http_client c(f.port());
  for (int round = 0; round < 3; ++round) {
    std::string prompt(30000 + round, 'a' + round);
    auto request = post_json(
        "/v1/chat/completions",
        R"({"model":"demo","stream":true,"max_tokens":2,"messages":[{"role":"user","content":")" +
            prompt + R"("}]})");
    std::this_thread::sleep_for(100ms);  // the watcher's read is waiting
    c.send(request.substr(0, 300));      // part of the head
    std::this_thread::sleep_for(50ms);
    c.send(request.substr(300));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete) << "round " << round;
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos) << "round " << round;
    c.clear();  // (the whole response, chunk framing included; nothing else was sent)
  }
  // (The engine counts a stream after its last write, which the client may
  // read first.)
  EXPECT_TRUE(wait_until([&] { return f.engine_stats().completed.load() == 3; }, 2s,
                         "three streams to complete"));
}

}  // namespace
}  // namespace tokengate::test

namespace tokengate::test {
namespace {

TEST(Streaming, ASlowClientStopsTheUpstreamInsteadOfGrowingMemory) {
  proxy_fixture f;
  http_client c(f.port());
  // About 100 MB of events as fast as the engine can write them, to a client
  // that reads nothing. With backpressure the engine's writes stall once the
  // socket buffers on the way are full; a proxy that buffered would let it
  // write everything.
  c.send(post_json(
      "/v1/chat/completions",
      R"({"model":"demo","stream":true,"demo":{"tokens":600000,"interval_ms":0,"ttft_ms":0}})"));
  ASSERT_TRUE(
      wait_until([&] { return f.engine_stats().active.load() == 1; }, 2s, "the stream to start"));
  std::uint64_t last = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        std::this_thread::sleep_for(300ms);
        auto now = f.engine_stats().bytes_streamed.load();
        bool stalled = now > 0 && now == last;
        last = now;
        return stalled;
      },
      20s, "the engine's writes to stall"));
  EXPECT_LT(last, 80u << 20) << "the engine wrote " << (last >> 20)
                             << " MiB before it was held back";
  EXPECT_EQ(f.engine_stats().completed.load(), 0u);
  std::cout << "[ measure ] upstream held back after " << (last >> 10)
            << " KiB in socket buffers\n";
  c.close();
  EXPECT_TRUE(wait_until([&] { return f.engine_stats().cancelled.load() == 1; }, 2s,
                         "the upstream to be closed"));
}

// A client that reads in sips with pauses makes the proxy's writes fall short
// (the socket takes part of an event, or nothing): what was not taken must
// follow in order, whole, and once. Every token of a 17 MB answer is checked.
TEST(Streaming, ASlowReaderGetsEveryEventInOrderWhenWritesFallShort) {
  proxy_fixture f;
  http_client c(f.port());
  constexpr std::size_t tokens = 100000;
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"demo","stream":true,"max_tokens":100000,)"
                   R"("demo":{"tokens":100000,"interval_ms":0,"ttft_ms":0}})"));
  ASSERT_TRUE(
      wait_until([&] { return f.engine_stats().active.load() == 1; }, 2s, "the stream to start"));
  std::this_thread::sleep_for(300ms);  // let every buffer on the way fill
  auto deadline = clock::now() + 30s;
  while (!c.raw().ends_with("\r\n0\r\n\r\n") && clock::now() < deadline) {
    c.read_some(1s);  // at most 16 KiB
    std::this_thread::sleep_for(1ms);
  }
  auto r = read_response(c, 1s);
  ASSERT_TRUE(r.complete);
  auto seen = demo_tokens_in(r.body);  // (throws on a torn event)
  EXPECT_TRUE(seen.in_order) << "a token arrived out of place";
  EXPECT_EQ(seen.seen, tokens);
  EXPECT_TRUE(r.body.ends_with("data: [DONE]\n\n"));
  EXPECT_GT(r.body.size(), 16u << 20);
}

}  // namespace
}  // namespace tokengate::test
