// What a budget says to the client: reset times written as OpenAI writes
// them, and a refusal that names the limit and when to come back.
#include "budget/answer.hpp"

#include <gtest/gtest.h>

namespace tokengate::budget {
namespace {

TEST(BudgetAnswer, ResetTimesAreWrittenTheWayOpenAiWritesThem) {
  EXPECT_EQ(reset_text(20), "20ms");
  EXPECT_EQ(reset_text(1000), "1s");
  EXPECT_EQ(reset_text(1500), "1.5s");
  EXPECT_EQ(reset_text(360'000), "6m0s");
  EXPECT_EQ(reset_text(3'723'000), "1h2m3s");
}

TEST(BudgetAnswer, ARefusalNamesTheLimitAndWhenToComeBack) {
  demand d;
  d.counters.push_back({"key:app", limit_kind::requests_per_minute, 10, 1});
  d.counters.push_back({"key:app", limit_kind::tokens_per_minute, 1000, 300});
  reservation r;
  r.admitted = false;
  r.refused_at = 1;
  r.states = {{4, 20'500}, {900, 20'500}};
  auto e = refusal(d, r);
  EXPECT_EQ(e.status, 429u);
  EXPECT_EQ(e.code, "rate_limit_exceeded");
  EXPECT_EQ(e.type, "tokens");
  EXPECT_NE(e.message.find("key:app on tokens_per_minute: limit 1000, used 900"),
            std::string::npos);
  EXPECT_EQ(retry_after(d, r), "21");
  auto headers = rate_limit_headers(d, r);
  ASSERT_EQ(headers.size(), 6u);
  EXPECT_EQ(headers[1],
            (std::pair<std::string, std::string>{"x-ratelimit-remaining-requests", "6"}));
  EXPECT_EQ(headers[4],
            (std::pair<std::string, std::string>{"x-ratelimit-remaining-tokens", "100"}));
  EXPECT_EQ(headers[5].second, "20.5s");
}

}  // namespace
}  // namespace tokengate::budget
