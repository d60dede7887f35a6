// The judgement of a failed attempt (upstream/retry_policy.hpp): how a
// Retry-After reads, which error bodies mean "the prompt is too long",
// what is tried again on the same target and how often.
#include "upstream/retry_policy.hpp"

#include <gtest/gtest.h>

#include <boost/beast/http/error.hpp>

namespace tokengate::upstream {
namespace {

using namespace std::chrono_literals;

TEST(RetryAfter, SecondsOrAnHttpDate) {
  auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(parse_retry_after("3", now), 3000ms);
  EXPECT_EQ(parse_retry_after(" 0 ", now), 0ms);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now), 10'000ms);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:30 GMT", now), 0ms);  // (past)
  EXPECT_FALSE(parse_retry_after("", now));
  EXPECT_FALSE(parse_retry_after("-1", now));
  EXPECT_FALSE(parse_retry_after("soon", now));
  EXPECT_FALSE(parse_retry_after("1.5", now));
}

TEST(ContextTooLong, EveryProvidersSpelling) {
  EXPECT_TRUE(says_context_too_long(
      R"({"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}})"));
  EXPECT_TRUE(says_context_too_long(
      R"({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}})"));
  EXPECT_TRUE(says_context_too_long(
      R"({"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens","code":400})"));
  EXPECT_TRUE(says_context_too_long(
      R"({"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}})"));
  EXPECT_TRUE(says_context_too_long(
      R"({"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096"})"));
  EXPECT_FALSE(says_context_too_long(
      R"({"error":{"message":"content policy","code":"content_policy_violation"}})"));
  EXPECT_FALSE(says_context_too_long(R"({"error":{"message":"invalid model"}})"));
}

TEST(SameTargetRetry, ByWhatFailed) {
  config::retry_settings s;  // same_target 1, rate_limited 2, cap 5 s
  std::mt19937_64 rng(1);
  const auto base = 10ms;
  EXPECT_TRUE(retry_same_target(attempt_failure::server_error, 1, {}, s, base, rng));
  EXPECT_FALSE(retry_same_target(attempt_failure::server_error, 2, {}, s, base, rng));
  EXPECT_TRUE(retry_same_target(attempt_failure::reset, 1, {}, s, base, rng));
  EXPECT_EQ(retry_same_target(attempt_failure::rate_limited, 1, 2000ms, s, base, rng), 2000ms);
  EXPECT_TRUE(retry_same_target(attempt_failure::rate_limited, 2, {}, s, base, rng));
  EXPECT_GE(*retry_same_target(attempt_failure::rate_limited, 1, {}, s, base, rng), 50ms);
  EXPECT_FALSE(retry_same_target(attempt_failure::rate_limited, 3, {}, s, base, rng));
  EXPECT_FALSE(retry_same_target(attempt_failure::rate_limited, 1, 6000ms, s, base, rng));
  for (auto never : {attempt_failure::timeout, attempt_failure::refused, attempt_failure::invalid,
                     attempt_failure::context_too_long})
    EXPECT_FALSE(retry_same_target(never, 1, {}, s, base, rng));
}

TEST(SameTargetRetry, AResetIsARetryAMalformedHeadIsNot) {
  EXPECT_EQ(head_failure_kind(net::error::connection_reset), attempt_failure::reset);
  EXPECT_EQ(head_failure_kind(http::error::partial_message), attempt_failure::reset);
  EXPECT_EQ(head_failure_kind(beast::error::timeout), attempt_failure::timeout);
  EXPECT_EQ(head_failure_kind(http::error::header_limit), attempt_failure::invalid);
}

TEST(RetryBudget, BoundedPerUpstreamPerWindow) {
  config::retry_settings s;
  s.per_target = 2;
  s.per_target_window = 1s;
  retry_budget b;
  auto t = std::chrono::steady_clock::now();
  EXPECT_TRUE(b.take("a", s, t));
  EXPECT_TRUE(b.take("a", s, t));
  EXPECT_FALSE(b.take("a", s, t + 500ms));
  EXPECT_TRUE(b.take("b", s, t));  // (another upstream's own)
  EXPECT_TRUE(b.take("a", s, t + 1s));
}

}  // namespace
}  // namespace tokengate::upstream
