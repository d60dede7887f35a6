// resume/prefill_request: the body that continues a stream from the text
// its client already has.
#include "resume/prefill_request.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

namespace {

namespace json = boost::json;
using tokengate::dialect;
using tokengate::resume::prefill_body;

json::object parsed_prefill(std::string_view body, dialect target, std::string_view delivered,
                            std::size_t tokens) {
  auto made = prefill_body(body, target, delivered, tokens);
  EXPECT_TRUE(made.has_value()) << body;
  return made ? json::parse(*made).as_object() : json::object{};
}

TEST(PrefillRequest, AChatRequestAsksTheEngineToContinueTheDeliveredText) {
  auto body = parsed_prefill(
      R"({"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]})",
      dialect::openai_chat, "The quick", 2);
  const auto& messages = body.at("messages").as_array();
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages.back().at("role").as_string(), "assistant");
  EXPECT_EQ(messages.back().at("content").as_string(), "The quick");
  EXPECT_EQ(body.at("continue_final_message"), true);
  EXPECT_EQ(body.at("add_generation_prompt"), false);
  EXPECT_EQ(body.at("max_tokens").as_int64(), 98);  // the answer's length stays the client's
  EXPECT_EQ(body.at("model").as_string(), "m");
}

TEST(PrefillRequest, AnAnthropicRequestEndsWithTheAssistantsTextAndNothingElse) {
  auto body =
      parsed_prefill(R"({"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"}]})",
                     dialect::anthropic_messages, "Once", 4);
  EXPECT_EQ(body.at("messages").as_array().back().at("content").as_string(), "Once");
  EXPECT_FALSE(body.contains("continue_final_message"));  // Anthropic continues as it is
  EXPECT_EQ(body.at("max_tokens").as_int64(), 6);
}

TEST(PrefillRequest, ALimitNeverFallsBelowOneToken) {
  auto body =
      parsed_prefill(R"({"max_completion_tokens":5,"messages":[{"role":"user","content":"hi"}]})",
                     dialect::openai_chat, "text", 9);
  EXPECT_EQ(body.at("max_completion_tokens").as_int64(), 1);
}

TEST(PrefillRequest, BodiesThatCannotCarryAPrefillAreLeftToRestart) {
  const std::string user = R"([{"role":"user","content":"hi"}])";
  // the client's own prefill: a second assistant message would change its meaning
  EXPECT_FALSE(prefill_body(R"({"messages":[{"role":"user","content":"a"},)"
                            R"({"role":"assistant","content":"b"}]})",
                            dialect::openai_chat, "x", 1));
  EXPECT_FALSE(prefill_body(R"({"input":"hi"})", dialect::openai_responses, "x", 1));
  EXPECT_FALSE(prefill_body(R"({"prompt":"hi"})", dialect::openai_completions, "x", 1));
  EXPECT_FALSE(prefill_body(R"({"prompt":"hi"})", dialect::openai_chat, "x", 1));
  EXPECT_FALSE(prefill_body("not json", dialect::openai_chat, "x", 1));
  EXPECT_FALSE(prefill_body(R"({"messages":)" + user, dialect::openai_chat, "x", 1));
}

}  // namespace
