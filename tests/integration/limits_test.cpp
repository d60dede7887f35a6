// Hostile or broken client input gets the right 4xx, quickly.
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

fixture_options tight_limits() {
  fixture_options o;
  o.top_extra =
      "limits:\n"
      "  max_body_bytes: 1024\n"
      "  max_head_bytes: 2048\n"
      "  max_header_count: 20\n"
      "  head_timeout: 300ms\n";
  return o;
}

std::string error_code_of(const http_response& r) {
  return std::string(boost::json::parse(r.body).at("error").at("code").as_string());
}

TEST(Limits, OversizedBodyIs413) {
  proxy_fixture f(tight_limits());
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","pad":")" + std::string(2000, 'x') + "\"}"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(error_code_of(r), "request_too_large");
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
}

TEST(Limits, OversizedHeadIs431) {
  proxy_fixture f(tight_limits());
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", "{}", "X-Big: " + std::string(4000, 'y') + "\r\n"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 431);
}

TEST(Limits, TooManyHeadersIs431) {
  proxy_fixture f(tight_limits());
  http_client c(f.port());
  std::string many;
  for (int i = 0; i < 30; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
  c.send(post_json("/v1/chat/completions", "{}", many));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 431);
  EXPECT_EQ(error_code_of(r), "too_many_headers");
}

TEST(Limits, SlowHeadIsCutOff) {
  proxy_fixture f(tight_limits());
  http_client c(f.port());
  auto start = clock::now();
  c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n");  // and then nothing
  auto r = read_response(c, 5s);
  EXPECT_TRUE(c.eof()) << "the connection must be closed";
  EXPECT_LT(clock::now() - start, 2s);
  EXPECT_EQ(r.status, 0);
}

TEST(Limits, UnknownPathWrongMethodAndAbsoluteTarget) {
  proxy_fixture f;
  EXPECT_EQ(http_get(f.port(), "/v2/whatever").status, 404);
  EXPECT_EQ(http_get(f.port(), "/v1/chat/completions").status, 405);
  http_client c(f.port());
  c.send("POST http://evil.example/v1/chat/completions HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 2\r\n\r\n{}");
  auto r = read_response(c);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
}

TEST(Limits, MalformedRequestIs400) {
  proxy_fixture f;
  http_client c(f.port());
  c.send("THIS IS NOT HTTP\r\n\r\n");
  auto r = read_response(c);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_code_of(r), "invalid_request");
}

TEST(Limits, AdminEndpointsAnswer) {
  proxy_fixture f;
  EXPECT_EQ(http_get(f.admin_port(), "/healthz").status, 200);
  EXPECT_EQ(http_get(f.admin_port(), "/readyz").status, 200);
  auto metrics = http_get(f.admin_port(), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("# TYPE tokengate_downstream_rq_total counter"), std::string::npos);
}

}  // namespace
}  // namespace tokengate::test
