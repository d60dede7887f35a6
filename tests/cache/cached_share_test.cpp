// cache/cached_share: a hit's usage marks the whole prompt as read from the
// cache, in each API's own terms, its output tokens untouched.
#include "cache/cached_share.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "cache/replay.hpp"

namespace {

namespace cache = tokengate::cache;
namespace json = boost::json;
using tokengate::dialect;

json::value marked(dialect d, std::string_view document) {
  auto out = cache::with_cached_share(d, document);
  EXPECT_FALSE(out.empty()) << document;
  return json::parse(out);
}

TEST(CachedShare, ChatMarksThePromptTokensCached) {
  auto v = marked(dialect::openai_chat,
                  R"({"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,)"
                  R"("total_tokens":10,"prompt_tokens_details":{"cached_tokens":2}}})");
  const auto& u = v.at("usage");
  EXPECT_EQ(u.at("prompt_tokens_details").at("cached_tokens"), 7);
  EXPECT_EQ(u.at("prompt_tokens"), 7);
  EXPECT_EQ(u.at("completion_tokens"), 3);
  EXPECT_EQ(u.at("total_tokens"), 10);
  // details made where the original had none (or null)
  auto bare =
      marked(dialect::openai_chat, R"({"usage":{"prompt_tokens":4,"prompt_tokens_details":null}})");
  EXPECT_EQ(bare.at("usage").at("prompt_tokens_details").at("cached_tokens"), 4);
}

TEST(CachedShare, ResponsesMarksTheInputTokensCachedInItsCompletedResponse) {
  auto v = marked(dialect::openai_responses,
                  R"({"type":"response.completed","response":{"id":"r","usage":)"
                  R"({"input_tokens":5,"input_tokens_details":{"cached_tokens":0},)"
                  R"("output_tokens":9,"total_tokens":14}}})");
  const auto& u = v.at("response").at("usage");
  EXPECT_EQ(u.at("input_tokens_details").at("cached_tokens"), 5);
  EXPECT_EQ(u.at("input_tokens"), 5);
  EXPECT_EQ(u.at("output_tokens"), 9);
}

TEST(CachedShare, AnthropicMovesTheWholePromptToCacheRead) {
  auto v = marked(dialect::anthropic_messages,
                  R"({"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":6,)"
                  R"("cache_read_input_tokens":10,"cache_creation_input_tokens":4,)"
                  R"("output_tokens":1}}})");
  const auto& u = v.at("message").at("usage");
  EXPECT_EQ(u.at("input_tokens"), 0);
  EXPECT_EQ(u.at("cache_creation_input_tokens"), 0);
  EXPECT_EQ(u.at("cache_read_input_tokens"), 20);
  EXPECT_EQ(u.at("output_tokens"), 1);
}

TEST(CachedShare, WhatHasNoUsageToMarkIsLeftAlone) {
  EXPECT_EQ(cache::with_cached_share(dialect::openai_chat, R"({"choices":[],"usage":null})"), "");
  EXPECT_EQ(cache::with_cached_share(dialect::anthropic_messages,
                                     R"({"type":"message_delta","usage":{"output_tokens":4}})"),
            "");
  EXPECT_EQ(cache::with_cached_share(dialect::openai_chat, "not json \"usage\":{"), "");
}

TEST(CachedShare, AReplayedHitCarriesTheMark) {
  cache::entry e;
  e.streamed = true;
  e.dialect = dialect::openai_chat;
  e.content_type = "text/event-stream";
  e.body =
      "data: {\"id\":\"chatcmpl-a\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}"
      "\n\n"
      "data: {\"id\":\"chatcmpl-a\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,"
      "\"completion_tokens\":1}}\n\n"
      "data: [DONE]\n\n";
  auto out = cache::replayed(e, {});
  EXPECT_NE(out.find(R"("prompt_tokens_details":{"cached_tokens":3})"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("content":"Hi")"), std::string::npos);
  cache::entry whole;
  whole.dialect = dialect::openai_responses;
  whole.content_type = "application/json";
  whole.body = R"({"id":"resp_1","output":[],"usage":{"input_tokens":2,"output_tokens":5}})";
  auto body = cache::replayed(whole, {});
  EXPECT_NE(body.find(R"("input_tokens_details":{"cached_tokens":2})"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("output_tokens":5)"), std::string::npos);
}

}  // namespace
