#include "upstream/target_url.hpp"

#include <gtest/gtest.h>

namespace tokengate::upstream {
namespace {

TEST(TargetUrl, SplitsHttpsBaseUrl) {
  auto t = parse_target_url("https://api.openai.com/v1");
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->tls);
  EXPECT_EQ(t->host, "api.openai.com");
  EXPECT_EQ(t->port, "443");
  EXPECT_EQ(t->host_header, "api.openai.com");
  EXPECT_EQ(t->upstream_path("/v1/chat/completions"), "/v1/chat/completions");
}

TEST(TargetUrl, KeepsExplicitPortAndPrefix) {
  auto t = parse_target_url("http://127.0.0.1:8000/openai/v1/");
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->tls);
  EXPECT_EQ(t->port, "8000");
  EXPECT_EQ(t->host_header, "127.0.0.1:8000");
  EXPECT_EQ(t->upstream_path("/v1/messages"), "/openai/v1/messages");
  EXPECT_EQ(t->upstream_path("/v1/models?x=1"), "/openai/v1/models?x=1");
}

TEST(TargetUrl, RootBaseUrlDropsTheV1OfTheClientPath) {
  auto t = parse_target_url("http://localhost:11434");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->upstream_path("/v1/chat/completions"), "/chat/completions");
}

TEST(TargetUrl, RejectsOtherSchemes) {
  EXPECT_FALSE(parse_target_url("ftp://x/v1"));
  EXPECT_FALSE(parse_target_url("not a url"));
  EXPECT_FALSE(parse_target_url("http:///v1"));
}

}  // namespace
}  // namespace tokengate::upstream
