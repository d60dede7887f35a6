// The usage of a whole answer found in its bytes, in every API's shape,
// whatever the reads cut it into, and never in a member that only looks
// like it (a nested object's, a string's content).
#include "stream/whole_usage.hpp"

#include <gtest/gtest.h>

#include <string>

#include "stream/cached_tokens.hpp"

namespace tokengate::stream {
namespace {

struct counts {
  std::optional<std::int64_t> input, output;
  bool operator==(const counts&) const = default;
};

counts read_whole(std::string_view body) {
  whole_usage u;
  u.feed(body);
  return {u.input_tokens(), u.output_tokens()};
}

// Every split of the body in two reads, and one byte per read, find the same.
void expect_found_however_cut(std::string_view body, counts expected) {
  EXPECT_EQ(read_whole(body), expected) << body;
  for (std::size_t cut = 0; cut <= body.size(); ++cut) {
    whole_usage u;
    u.feed(body.substr(0, cut));
    u.feed(body.substr(cut));
    ASSERT_EQ((counts{u.input_tokens(), u.output_tokens()}), expected) << "cut at " << cut;
  }
  whole_usage bytewise;
  for (char c : body) bytewise.feed(std::string_view(&c, 1));
  EXPECT_EQ((counts{bytewise.input_tokens(), bytewise.output_tokens()}), expected);
}

TEST(WholeUsage, ChatCompletion) {
  expect_found_however_cut(
      R"({"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":)"
      R"({"role":"assistant","content":"the \"usage\": {\"prompt_tokens\": 9} \\"},)"
      R"("finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,)"
      R"("total_tokens":17,"prompt_tokens_details":{"cached_tokens":0}},"system_fingerprint":null})",
      {12, 5});
}

// The prompt tokens the engine found cached, in each API's spelling.
TEST(WholeUsage, CachedTokensInEachSpelling) {
  auto cached = [](std::string_view body) {
    whole_usage u;
    u.feed(body);
    return u.cached_tokens();
  };
  EXPECT_EQ(cached(R"({"usage":{"prompt_tokens":12,"completion_tokens":5,)"
                   R"("prompt_tokens_details":{"cached_tokens":8}}})"),
            8);
  EXPECT_EQ(cached(R"({"usage":{"input_tokens":12,"output_tokens":5,)"
                   R"("input_tokens_details":{"cached_tokens":6}}})"),
            6);
  EXPECT_EQ(
      cached(R"({"usage":{"input_tokens":25,"cache_read_input_tokens":20,"output_tokens":7}})"),
      20);
  EXPECT_EQ(cached(R"({"usage":{"prompt_tokens":12,"completion_tokens":5}})"), std::nullopt);
  // And in one event of a stream, without a parse.
  EXPECT_EQ(cached_tokens_in(R"({"choices":[],"usage":{"prompt_tokens":9,)"
                             R"("prompt_tokens_details":{"cached_tokens": 64}}})"),
            64);
  EXPECT_EQ(cached_tokens_in(R"({"type":"message_start","message":{"usage":{)"
                             R"("input_tokens":9,"cache_read_input_tokens":3}}})"),
            3);
  EXPECT_EQ(cached_tokens_in(R"({"usage":{"prompt_tokens":9}})"), std::nullopt);
}

// Anthropic's input_tokens leaves its cache reads and writes out; the
// usage counts the whole prompt, as OpenAI's prompt_tokens does.
TEST(WholeUsage, AnthropicCacheReadsAndWritesArePartOfTheInput) {
  whole_usage u;
  u.feed(R"({"type":"message","usage":{"input_tokens":4,"cache_creation_input_tokens":30,)"
         R"("cache_read_input_tokens":200,"output_tokens":7}})");
  EXPECT_EQ(u.input_tokens(), 234);
  EXPECT_EQ(u.cached_tokens(), 200);
  EXPECT_EQ(u.cache_write_tokens(), 30);
  whole_usage openai;  // prompt_tokens already counts its cached part
  openai.feed(R"({"usage":{"prompt_tokens":120,"completion_tokens":5,)"
              R"("prompt_tokens_details":{"cached_tokens":100}}})");
  EXPECT_EQ(openai.input_tokens(), 120);
  EXPECT_EQ(openai.cached_tokens(), 100);
  EXPECT_EQ(openai.cache_write_tokens(), std::nullopt);
}

TEST(WholeUsage, AnthropicMessage) {
  expect_found_however_cut(
      R"({"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text",)"
      R"("text":"usage"}],"stop_reason":"end_turn","usage":{"input_tokens":25,)"
      R"("cache_read_input_tokens":0,"output_tokens":7}})",
      {25, 7});
}

TEST(WholeUsage, ResponsesObjectWithToolsAndMetadataAround) {
  expect_found_however_cut(
      R"({"id":"resp_1","object":"response","output":[{"type":"message","content":)"
      R"([{"type":"output_text","text":"hi","usage":{"input_tokens":999}}]}],)"
      R"("tools":[{"type":"function","parameters":{"usage":{"type":"string"}}}],)"
      R"("usage" : {"input_tokens":40,"output_tokens":3,"total_tokens":43},)"
      "\n  \"user\":null,\"metadata\":{\"usage\":\"x\"}}",
      {40, 3});
}

TEST(WholeUsage, CompletionsWithUsageLast) {
  expect_found_however_cut(
      R"({"object":"text_completion","choices":[{"text":"\\\\\"}"}],"usage":{"prompt_tokens":1,"completion_tokens":2}})",
      {1, 2});
}

TEST(WholeUsage, AStringValueNamedUsageIsNotTheMember) {
  expect_found_however_cut(R"({"object":"usage","data":[{"usage":{"prompt_tokens":3}}]})", {});
}

TEST(WholeUsage, NothingWhereThereIsNoUsageOrItIsNotCounts) {
  expect_found_however_cut(R"({"error":{"message":"bad","type":"invalid_request_error"}})", {});
  expect_found_however_cut(R"({"usage":null,"x":1})", {});
  expect_found_however_cut(R"({"usage":{"prompt_tokens":"many"}})", {});
  EXPECT_EQ(read_whole("not json at all"), counts{});
}

TEST(WholeUsage, AHugeUsageValueIsGivenUpNotHeld) {
  std::string body = R"({"usage":{"prompt_tokens":1,"pad":")" +
                     std::string(2 * whole_usage::max_usage_bytes, 'x') + R"("},"more":1})";
  EXPECT_EQ(read_whole(body), counts{});
}

}  // namespace
}  // namespace tokengate::stream
