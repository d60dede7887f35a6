// Streams that outlive their upstream (resume: restart): an OpenAI chat
// stream whose upstream resets, sends an error event or goes silent after
// its first tokens is continued from a new attempt, and the client reads
// exactly the answer an unfailed run gives: one opening, the text once and
// in order, one finish. A new attempt whose text differs ends in one clean
// error event, never a spliced answer; resumes are bounded.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"
#include "support/observed.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test::resume {
namespace {

fixture_options resuming(const std::string& more_upstream = "",
                         const std::string& resume = "{mode: restart, max_resumes: 2}") {
  fixture_options o;
  o.upstream_extra = more_upstream;
  o.top_extra =
      "routes:\n"
      "  - {name: chat, models: [demo], targets: [{upstream: demo}], retry_backoff: 1ms,\n"
      "     resume: " +
      resume + "}\n";
  return o;
}

http_response chat(proxy_fixture& f, const std::string& knobs) {
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"demo","stream":true,"stream_options":{"include_usage":true},)"
                   R"("messages":[{"role":"user","content":"hi"}],"demo":)" +
                       knobs + "}"));
  return read_response(c, std::chrono::seconds(10));
}

std::string text_of(const stream::stream_facts& facts) {
  return facts.text_by_choice.empty() ? "" : facts.text_by_choice.begin()->second;
}

// (Counted when the exchange ends, just after the client has read it.)
std::uint64_t resumes_counted(proxy_fixture& f, const std::string& labels) {
  return metric_once_counted(f, "tokengate_stream_resumes_total{" + labels + "}");
}

// The answer an unfailed run gives, for comparison.
std::string unfailed_text(proxy_fixture& f) {
  auto facts = observed(chat(f, R"({"tokens":12,"ttft_ms":0,"interval_ms":2})").body);
  EXPECT_TRUE(facts.ended_properly());
  return text_of(facts);
}

void expect_whole_answer(const http_response& r, const std::string& expected) {
  ASSERT_TRUE(r.complete);
  auto facts = observed(r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_FALSE(facts.error) << r.body;
  EXPECT_EQ(text_of(facts), expected) << r.body;
  EXPECT_EQ(facts.content_events, 12u);
  EXPECT_EQ(facts.finish_by_choice.size(), 1u);
  std::size_t openings = 0;
  for (auto at = r.body.find(R"("role":"assistant")"); at != std::string::npos;
       at = r.body.find(R"("role":"assistant")", at + 1))
    ++openings;
  EXPECT_EQ(openings, 1u) << r.body;
  // The usage the client gets is one answer's: its 12 completion tokens.
  EXPECT_EQ(facts.output_tokens, 12);
}

TEST(Resume, AResetMidStreamIsContinuedToTheWholeAnswer) {
  proxy_fixture f(resuming());
  auto expected = unfailed_text(f);
  auto r = chat(f, R"({"tokens":12,"ttft_ms":0,"interval_ms":2,"reset_after":5,"fail_times":1})");
  expect_whole_answer(r, expected);
  EXPECT_EQ(f.engine_stats().requests.load(), 3u);  // the unfailed run, the cut one, the resume
  EXPECT_EQ(resumes_counted(f, R"(route="chat",mode="restart",reason="reset",result="completed")"),
            1u);
}

TEST(Resume, AnErrorEventMidStreamIsContinuedNotPassedOn) {
  proxy_fixture f(resuming());
  auto expected = unfailed_text(f);
  auto r = chat(f, R"({"tokens":12,"ttft_ms":0,"interval_ms":2,"error_after":4,"fail_times":1})");
  expect_whole_answer(r, expected);
  EXPECT_EQ(r.body.find("demo engine failed"), std::string::npos) << r.body;
}

TEST(Resume, AStallIsResumedAfterTheIdleTimeout) {
  proxy_fixture f(resuming("    timeouts: {idle: 300ms}\n"));
  auto expected = unfailed_text(f);
  auto start = std::chrono::steady_clock::now();
  auto r = chat(f, R"({"tokens":12,"ttft_ms":0,"interval_ms":2,"stall_after":6,"fail_times":1})");
  expect_whole_answer(r, expected);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(Resume, ANewAttemptWhoseTextDiffersEndsInOneCleanError) {
  proxy_fixture f(resuming());
  auto r = chat(f, R"({"tokens":12,"ttft_ms":0,"interval_ms":2,"reset_after":5,"fail_times":1,)"
                   R"("vary_text":true})");
  ASSERT_TRUE(r.complete);
  auto facts = observed(r.body);
  EXPECT_TRUE(facts.error) << r.body;
  EXPECT_FALSE(facts.ended_properly());
  EXPECT_EQ(facts.content_events, 5u) << "nothing spliced after the five sent";
  EXPECT_NE(r.body.find("resume_diverged"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("[DONE]"), std::string::npos);
}

TEST(Resume, ResumesAreBoundedThenTheStreamEndsWithAnError) {
  proxy_fixture f(resuming());
  auto r = chat(f, R"({"tokens":12,"ttft_ms":0,"interval_ms":2,"reset_after":5})");
  ASSERT_TRUE(r.complete);
  auto facts = observed(r.body);
  EXPECT_TRUE(facts.error) << r.body;
  EXPECT_EQ(facts.content_events, 5u);
  EXPECT_EQ(f.engine_stats().requests.load(), 3u);  // the first, and two resumes
}

TEST(Resume, TheLastResumeAllowedStillCatchesUp) {
  proxy_fixture f(resuming());
  auto expected = unfailed_text(f);
  auto r = chat(f, R"({"tokens":12,"ttft_ms":0,"interval_ms":2,"reset_after":5,"fail_times":2})");
  expect_whole_answer(r, expected);
  EXPECT_EQ(f.engine_stats().requests.load(), 4u);  // the unfailed run, two cut, the last resume
}

TEST(Resume, AStreamPastItsBufferIsNotResumed) {
  proxy_fixture f(resuming("", "{mode: restart, buffer_bytes: 10}"));
  auto r = chat(f, R"({"tokens":12,"ttft_ms":0,"interval_ms":2,"reset_after":5,"fail_times":1})");
  ASSERT_TRUE(r.complete);
  auto facts = observed(r.body);
  EXPECT_TRUE(facts.error) << r.body;
  EXPECT_EQ(facts.content_events, 5u);  // ("The quick brown fox jumps": past 10 bytes)
  EXPECT_EQ(f.engine_stats().requests.load(), 1u);
}

TEST(Resume, OffByDefault) {
  fixture_options o;
  o.top_extra = "routes:\n  - {name: chat, models: [demo], targets: [{upstream: demo}]}\n";
  proxy_fixture f(o);
  auto r = chat(f, R"({"tokens":12,"ttft_ms":0,"interval_ms":2,"reset_after":5,"fail_times":1})");
  auto facts = observed(r.body);
  EXPECT_TRUE(facts.error);
  EXPECT_EQ(facts.content_events, 5u);
  EXPECT_EQ(f.engine_stats().requests.load(), 1u);
}

}  // namespace
}  // namespace tokengate::test::resume
