// The demo engine's faults mid-answer, through the proxy: what a client
// gets today when a stream stalls or carries an error event after its
// first tokens (one clean error, never a truncated success), and the
// engine's deterministic answers, continued exactly from a prefill (what
// resuming a stream builds on).
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"
#include "support/observed.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test::demo_faults {
namespace {

namespace json = boost::json;

http_response ask(proxy_fixture& f, const std::string& path, const std::string& body) {
  http_client c(f.port());
  c.send(post_json(path, body));
  return read_response(c);
}

std::string whole_text(const stream::stream_facts& facts) {
  return facts.text_by_choice.empty() ? std::string() : facts.text_by_choice.begin()->second;
}

TEST(DemoFaults, AStallAfterTheFirstTokensEndsInOneErrorEvent) {
  fixture_options o;
  o.upstream_extra = "    timeouts: {idle: 300ms}\n";
  proxy_fixture f(o);
  auto r = ask(f, "/v1/chat/completions",
               R"({"model":"demo","stream":true,"max_tokens":10,"messages":[],)"
               R"("demo":{"tokens":10,"ttft_ms":0,"interval_ms":0,"stall_after":4}})");
  ASSERT_TRUE(r.complete);
  auto facts = observed(r.body, dialect::openai_chat);
  EXPECT_EQ(facts.content_events, 4u);
  EXPECT_TRUE(facts.error) << r.body;
  EXPECT_FALSE(facts.ended_properly());
  EXPECT_NE(r.body.find("upstream_timeout"), std::string::npos) << r.body;
}

TEST(DemoFaults, AnErrorEventMidStreamReachesTheClientAsTheEnd) {
  proxy_fixture f;
  for (std::string path : {"/v1/chat/completions", "/v1/messages", "/v1/responses"}) {
    const bool responses = path == "/v1/responses";
    auto r =
        ask(f, path,
            std::string(R"({"model":"demo","stream":true,)") +
                (responses ? R"("max_output_tokens":10,"input":"hi",)"
                           : R"("max_tokens":10,"messages":[{"role":"user","content":"hi"}],)") +
                R"("demo":{"tokens":10,"ttft_ms":0,"interval_ms":0,"error_after":3}})");
    ASSERT_TRUE(r.complete) << path;
    auto facts = observed(r.body, dialect_for_path(path));
    EXPECT_EQ(facts.content_events, 3u) << path;
    EXPECT_TRUE(facts.error) << path << " " << r.body;
    EXPECT_FALSE(facts.ended_properly()) << path;
  }
}

TEST(DemoFaults, APrefillIsContinuedExactlyWhereItStops) {
  proxy_fixture f;
  const std::string knobs = R"("demo":{"tokens":12,"ttft_ms":0,"interval_ms":0})";
  auto whole = ask(f, "/v1/chat/completions",
                   R"({"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}],)" +
                       knobs + "}");
  auto text = whole_text(observed(whole.body, dialect::openai_chat));
  ASSERT_FALSE(text.empty());
  // The same request, the first five tokens' text given as the assistant's.
  auto five = observed(
      ask(f, "/v1/chat/completions",
          R"({"model":"demo","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}],)" +
              knobs + "}")
          .body,
      dialect::openai_chat);
  auto prefix = whole_text(five);
  auto prefill = json::serialize(json::string(prefix));
  for (std::string path : {"/v1/chat/completions", "/v1/messages"}) {
    const bool chat = path == "/v1/chat/completions";
    auto r =
        ask(f, path,
            std::string(R"({"model":"demo","stream":true,)") +
                (chat ? R"("continue_final_message":true,"add_generation_prompt":false,)"
                      : R"("max_tokens":100,)") +
                R"("messages":[{"role":"user","content":"hi"},{"role":"assistant","content":)" +
                prefill + "}]," + knobs + "}");
    auto facts = observed(r.body, dialect_for_path(path));
    EXPECT_EQ(facts.content_events, 7u) << path;
    EXPECT_EQ(prefix + whole_text(facts), text) << path;
  }
}

TEST(DemoFaults, AModelThatRefusesAPrefillSaysSoWithA400) {
  proxy_fixture f;
  auto r = ask(f, "/v1/chat/completions",
               R"({"model":"demo","messages":[{"role":"user","content":"hi"},)"
               R"({"role":"assistant","content":"Once"}],"demo":{"refuse_prefill":true}})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("prefill"), std::string::npos) << r.body;
  // Without a prefill the same knobs answer.
  r = ask(
      f, "/v1/chat/completions",
      R"({"model":"demo","messages":[{"role":"user","content":"hi"}],"demo":{"refuse_prefill":true}})");
  EXPECT_EQ(r.status, 200) << r.body;
}

}  // namespace
}  // namespace tokengate::test::demo_faults
