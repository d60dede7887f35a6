// Upstream faults: the client always gets a clear, well-framed answer.
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "stream/sse_parser.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

struct collected final : stream::sse_sink {
  void on_event(const stream::sse_event& e) override { events.push_back({std::string(e.type), std::string(e.data)}); }
  std::vector<std::pair<std::string, std::string>> events;
};

collected events_of(const std::string& body) {
  stream::sse_parser p;
  collected c;
  p.feed(body, c);
  return c;
}

TEST(Failures, UpstreamResetMidStreamEndsWithAnErrorEventAndProperFraming) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"demo":{"tokens":10,"interval_ms":10,"reset_after":3}})"));
  auto r = read_response(c, 5s);
  ASSERT_TRUE(r.complete) << "the chunked body must be terminated, not cut";
  EXPECT_EQ(r.status, 200);
  auto events = events_of(r.body).events;
  ASSERT_GE(events.size(), 2u);
  auto last = boost::json::parse(events.back().second);
  EXPECT_EQ(last.at("error").at("code").as_string(), "upstream_disconnected");
  EXPECT_EQ(r.body.find("[DONE]"), std::string::npos) << "a cut stream must not look complete";
  EXPECT_TRUE(wait_until([&] {
    return http_get(f.admin_port(), "/metrics").body.find("tokengate_downstream_rq_stream_failed_total 1\n") != std::string::npos;
  }, 2s, "the failure to be counted"));
  // The connection is still usable.
  c.clear();
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","max_tokens":1})"));
  EXPECT_EQ(read_response(c).status, 200);
}

TEST(Failures, AnthropicStreamFailureUsesAnthropicErrorEvent) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json("/v1/messages", R"({"model":"demo","stream":true,"max_tokens":10,"demo":{"tokens":10,"interval_ms":10,"reset_after":2}})"));
  auto r = read_response(c, 5s);
  ASSERT_TRUE(r.complete);
  auto events = events_of(r.body).events;
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().first, "error");
  EXPECT_EQ(boost::json::parse(events.back().second).at("error").at("type").as_string(), "upstream_error");
  EXPECT_EQ(r.body.find("message_stop"), std::string::npos);
}

TEST(Failures, UnreachableUpstreamIs502WithJsonError) {
  fixture_options o;
  o.base_url = "http://127.0.0.1:1/v1";  // nothing listens on port 1
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.headers["content-type"], "application/json");
  auto error = boost::json::parse(r.body).at("error");
  EXPECT_EQ(error.at("type").as_string(), "upstream_error");
  EXPECT_EQ(error.at("code").as_string(), "upstream_unavailable");
}

TEST(Failures, FirstByteTimeoutIs504AndClosesTheUpstream) {
  fixture_options o;
  o.upstream_extra = "    timeouts:\n      first_byte: 300ms\n";
  proxy_fixture f(o);
  http_client c(f.port());
  auto start = clock::now();
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":false,"demo":{"ttft_ms":5000}})"));
  auto r = read_response(c, 5s);
  EXPECT_EQ(r.status, 504);
  EXPECT_LT(clock::now() - start, 2s);
  EXPECT_EQ(boost::json::parse(r.body).at("error").at("code").as_string(), "upstream_timeout");
  EXPECT_TRUE(wait_until([&] { return f.engine_stats().cancelled.load() == 1; }, 2s, "the engine to be told"));
}

TEST(Failures, IdleGapTimeoutMidStreamEndsWithAnErrorEvent) {
  fixture_options o;
  o.upstream_extra = "    timeouts:\n      idle: 200ms\n";
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"demo":{"tokens":5,"interval_ms":2000}})"));
  auto r = read_response(c, 5s);
  ASSERT_TRUE(r.complete);
  auto events = events_of(r.body).events;
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(boost::json::parse(events.back().second).at("error").at("code").as_string(), "upstream_timeout");
}

TEST(Failures, UpstreamErrorStatusPassesThroughWithItsHeaders) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","demo":{"status":429}})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_TRUE(boost::json::parse(r.body).as_object().contains("error"));
}

}  // namespace
}  // namespace tokengate::test
