// Whole answers and errors translated both ways, and the endings a relay
// asks of a translated stream: the cut at the limit, a failure.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"
#include "translate/anthropic_from_chat.hpp"
#include "translate/chat_from_anthropic.hpp"
#include "translate/errors.hpp"

namespace tokengate {
namespace {

namespace json = boost::json;

TEST(WholeAnswers, AnthropicMessageForAChatClient) {
  translate::chat_from_anthropic t(false);
  unsigned status = 200;
  std::string body = R"({"id":"msg_1","type":"message","role":"assistant","model":"claude",
    "content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"Hi."},
      {"type":"tool_use","id":"t1","name":"get","input":{"a":1}}],"stop_reason":"tool_use",
    "usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":5}})";
  t.whole(status, body);
  auto c = json::parse(body).as_object();
  EXPECT_EQ(status, 200u);
  EXPECT_EQ(c.at("object"), "chat.completion");
  const auto& choice = c.at("choices").at(0);
  EXPECT_EQ(choice.at("finish_reason"), "tool_calls");
  EXPECT_EQ(choice.at("message").at("content"), "Hi.");
  EXPECT_EQ(choice.at("message").at("reasoning_content"), "hm");
  EXPECT_EQ(choice.at("message").at("tool_calls").at(0).at("function").at("arguments"),
            R"({"a":1})");
  EXPECT_EQ(c.at("usage").at("prompt_tokens"), 100);  // cached tokens counted in, as OpenAI does
  EXPECT_EQ(c.at("usage").at("prompt_tokens_details").at("cached_tokens"), 90);
  EXPECT_EQ(c.at("usage").at("completion_tokens"), 5);
}

TEST(WholeAnswers, ChatCompletionForAnAnthropicClient) {
  translate::anthropic_from_chat t("asked");
  unsigned status = 200;
  std::string body = R"({"id":"c1","object":"chat.completion","model":"llama","choices":[{"index":0,
    "message":{"role":"assistant","content":"Hi.","tool_calls":[{"id":"t1","type":"function",
    "function":{"name":"get","arguments":"{\"a\":1}"}}]},"finish_reason":"length"}],
    "usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":90}}})";
  t.whole(status, body);
  auto m = json::parse(body).as_object();
  EXPECT_EQ(m.at("type"), "message");
  EXPECT_EQ(m.at("model"), "llama");
  EXPECT_EQ(m.at("stop_reason"), "max_tokens");
  EXPECT_EQ(m.at("content"), json::parse(R"([{"type":"text","text":"Hi."},
    {"type":"tool_use","id":"t1","name":"get","input":{"a":1}}])"));
  EXPECT_EQ(m.at("usage"), json::parse(R"({"input_tokens":10,"cache_read_input_tokens":90,
    "output_tokens":5})"));
}

TEST(WholeAnswers, ErrorsKeepTheirMeaningAndSDKStatus) {
  unsigned status = 529;
  std::string body =
      R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})";
  translate::anthropic_error_to_openai(status, body);
  EXPECT_EQ(status, 503u);
  EXPECT_EQ(json::parse(body),
            json::parse(R"({"error":{"message":"Overloaded","type":"server_error",
    "param":null,"code":"overloaded"}})"));

  status = 429;
  body = R"({"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}})";
  translate::openai_error_to_anthropic(status, body);
  EXPECT_EQ(status, 429u);
  EXPECT_EQ(json::parse(body), json::parse(R"({"type":"error","error":{"type":"rate_limit_error",
    "message":"slow down"}})"));

  status = 503;
  body = "<html>bad gateway</html>";  // not JSON: still an error in the client's shape
  translate::openai_error_to_anthropic(status, body);
  EXPECT_EQ(status, 529u);
  EXPECT_EQ(json::parse(body).at("error").at("type"), "overloaded_error");
  EXPECT_EQ(json::parse(body).at("error").at("message"), "upstream answered 503");

  // A 200 that is not an answer is not passed on as one.
  translate::chat_from_anthropic t(false);
  status = 200;
  body = "garbage";
  t.whole(status, body);
  EXPECT_EQ(status, 502u);
}

stream::stream_facts observe_events(const std::string& events, dialect d) {
  stream::stream_observer observer(d, true);
  stream::sse_parser parser;
  parser.feed(events, observer);
  return observer.facts();
}

void feed_events(stream::answer_translator& t, std::string_view body, std::string& out) {
  struct sink final : stream::sse_sink {
    stream::answer_translator* t;
    std::string* out;
    void on_event(const stream::sse_event& e) override { t->on_event(e, *out); }
  } s;
  s.t = &t;
  s.out = &out;
  stream::sse_parser parser;
  parser.feed(body, s);
}

TEST(StreamEndings, CutAtTheLimitEndsProperlyInTheClientsDialect) {
  translate::anthropic_from_chat to_anthropic("m");
  std::string out;
  feed_events(to_anthropic,
              "data: "
              "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
              "\"Hi\"}}]}\n\n",
              out);
  to_anthropic.on_cut(1, out);
  auto facts = observe_events(out, dialect::anthropic_messages);
  EXPECT_TRUE(facts.ended_properly()) << out;
  EXPECT_EQ(facts.finish_reason, "max_tokens");
  EXPECT_EQ(facts.output_tokens, 1);
  EXPECT_NE(out.find("content_block_stop"), std::string::npos);  // the open block closed first

  translate::chat_from_anthropic to_chat(true);
  out.clear();
  feed_events(to_chat,
              "event: message_start\ndata: "
              "{\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"c\","
              "\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
              out);
  to_chat.on_cut(2, out);
  facts = observe_events(out, dialect::openai_chat);
  EXPECT_TRUE(facts.ended_properly()) << out;
  EXPECT_EQ(facts.finish_reason, "length");
  EXPECT_EQ(facts.output_tokens, 2);
}

TEST(StreamEndings, AFailureIsAnErrorEventNotAnEnd) {
  auto why = request_error::upstream(502, "upstream_disconnected", "upstream 'a' failed");
  translate::anthropic_from_chat to_anthropic("m");
  std::string out;
  to_anthropic.on_failure(why, out);
  auto facts = observe_events(out, dialect::anthropic_messages);
  EXPECT_TRUE(facts.error);
  EXPECT_FALSE(facts.ended_properly());
  translate::chat_from_anthropic to_chat(false);
  out.clear();
  to_chat.on_failure(why, out);
  facts = observe_events(out, dialect::openai_chat);
  EXPECT_TRUE(facts.error);
  EXPECT_NE(out.find("upstream 'a' failed"), std::string::npos);
}

}  // namespace
}  // namespace tokengate

namespace tokengate {
namespace {

// A stream's cached tokens in the client's dialect: Anthropic's reads and
// writes become part of a chat client's prompt_tokens, its reads the
// cached_tokens; a chat upstream's cached_tokens an Anthropic client's
// cache_read_input_tokens, taken out of its input_tokens.
TEST(StreamUsage, CachedTokensBothWays) {
  translate::chat_from_anthropic to_chat(true);
  std::string out;
  feed_events(to_chat,
              "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\","
              "\"model\":\"c\",\"usage\":{\"input_tokens\":3,\"cache_creation_input_tokens\":40,"
              "\"cache_read_input_tokens\":500,\"output_tokens\":1}}}\n\n"
              "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
              "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
              "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
              "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
              "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
              "\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n"
              "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
              out);
  auto usage_at = out.rfind("\"usage\":");
  ASSERT_NE(usage_at, std::string::npos) << out;
  auto facts = observe_events(out, dialect::openai_chat);
  EXPECT_EQ(facts.input_tokens, 543);
  EXPECT_NE(out.find("\"prompt_tokens_details\":{\"cached_tokens\":500}", usage_at),
            std::string::npos)
      << out;

  translate::anthropic_from_chat to_anthropic("m");
  out.clear();
  feed_events(
      to_anthropic,
      "data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
      "\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":120,"
      "\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":100}}}\n\n"
      "data: [DONE]\n\n",
      out);
  auto anthropic = observe_events(out, dialect::anthropic_messages);
  EXPECT_TRUE(anthropic.ended_properly()) << out;
  EXPECT_EQ(anthropic.cache_read_tokens, 100);
  EXPECT_EQ(anthropic.input_tokens, 120);  // 20 not cached + the 100 read
}

}  // namespace
}  // namespace tokengate
