// cache/forms: a stored stream rebuilt whole and a stored whole answer
// told as events, in each API, with the same content and usage.
#include "cache/forms.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

namespace {

namespace cache = tokengate::cache;
namespace json = boost::json;
using tokengate::dialect;

const std::string chat_events =
    "data: {\"id\":\"chatcmpl-1\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\"The\"},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\" fox\"},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"created\":5,\"model\":\"m\",\"choices\":[],"
    "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n"
    "data: [DONE]\n\n";

const std::string anthropic_events =
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\","
    "\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\","
    "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,"
    "\"output_tokens\":1}}}\n\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
    "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
    "event: ping\ndata: {\"type\":\"ping\"}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
    "\"delta\":{\"type\":\"text_delta\",\"text\":\"The\"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
    "\"delta\":{\"type\":\"text_delta\",\"text\":\" fox\"}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"
    "\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
    "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
    "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
    "\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":7}}\n\n"
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

const std::string responses_whole =
    R"({"id":"resp_1","object":"response","status":"completed","model":"m","output":[)"
    R"({"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[)"
    R"({"type":"output_text","annotations":[],"text":"The quick fox"}]},)"
    R"({"id":"fc_1","type":"function_call","status":"completed","call_id":"c1","name":"f",)"
    R"("arguments":"{\"a\":1}"}],"usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7}})";

TEST(CacheForms, AChatStreamAddsUpToItsWholeAnswer) {
  auto whole = json::parse(cache::whole_from_events(dialect::openai_chat, chat_events));
  EXPECT_EQ(whole.at("object"), "chat.completion");
  EXPECT_EQ(whole.at("id"), "chatcmpl-1");
  const auto& choice = whole.at("choices").at(0);
  EXPECT_EQ(choice.at("message").at("content"), "The fox");
  EXPECT_EQ(choice.at("message").at("role"), "assistant");
  EXPECT_EQ(choice.at("finish_reason"), "stop");
  EXPECT_EQ(whole.at("usage"),
            json::parse(R"({"prompt_tokens":3,"completion_tokens":2,"total_tokens":5})"));
}

TEST(CacheForms, AnAnthropicStreamAddsUpToItsMessageTextAndToolInput) {
  auto whole = json::parse(cache::whole_from_events(dialect::anthropic_messages, anthropic_events));
  EXPECT_EQ(whole.at("id"), "msg_1");
  EXPECT_EQ(whole.at("content").at(0).at("text"), "The fox");
  EXPECT_EQ(whole.at("content").at(1).at("input"), json::parse(R"({"a":1})"));
  EXPECT_EQ(whole.at("stop_reason"), "tool_use");
  EXPECT_EQ(whole.at("usage"), json::parse(R"({"input_tokens":3,"output_tokens":7})"));
}

// Whole -> events -> whole is the same answer, member for member.
TEST(CacheForms, EachApisWholeAnswerToldAsEventsAddsUpToItselfAgain) {
  struct one {
    dialect d;
    std::string whole;
  };
  for (const auto& [d, whole] :
       {one{dialect::openai_chat, cache::whole_from_events(dialect::openai_chat, chat_events)},
        one{dialect::anthropic_messages,
            cache::whole_from_events(dialect::anthropic_messages, anthropic_events)},
        one{dialect::openai_responses, responses_whole}}) {
    auto events = cache::events_from_whole(d, whole);
    ASSERT_FALSE(events.empty()) << whole;
    EXPECT_EQ(json::parse(cache::whole_from_events(d, events)), json::parse(whole)) << events;
  }
}

TEST(CacheForms, TheTextArrivesAWordAnEvent) {
  auto events = cache::events_from_whole(dialect::openai_responses, responses_whole);
  EXPECT_NE(events.find("\"delta\":\"The\""), std::string::npos);
  EXPECT_NE(events.find("\"delta\":\" quick\""), std::string::npos);
  EXPECT_NE(events.find("\"delta\":\" fox\""), std::string::npos);
  EXPECT_NE(events.find("\"sequence_number\":0,"), std::string::npos);
  EXPECT_NE(events.find("event: response.completed\n"), std::string::npos);
  auto chat = cache::events_from_whole(dialect::openai_chat,
                                       cache::whole_from_events(dialect::openai_chat, chat_events));
  EXPECT_NE(chat.find("\"content\":\" fox\""), std::string::npos);
  EXPECT_NE(chat.find("\"choices\":[],\"usage\""), std::string::npos);
  EXPECT_TRUE(chat.ends_with("data: [DONE]\n\n"));
}

TEST(CacheForms, WhatIsNotAnAnswerOfItsApiIsNotRebuilt) {
  EXPECT_EQ(cache::events_from_whole(dialect::openai_chat, "not json"), "");
  EXPECT_EQ(cache::events_from_whole(dialect::openai_responses, R"({"id":"x"})"), "");
  EXPECT_EQ(cache::whole_from_events(dialect::openai_responses, chat_events), "");
  EXPECT_FALSE(cache::shares_forms(dialect::openai_completions));
  auto e = std::make_shared<cache::entry>();
  e->dialect = dialect::openai_completions;
  e->body = "{}";
  EXPECT_EQ(cache::in_form(e, true), nullptr);
  EXPECT_EQ(cache::in_form(e, false), e);
}

}  // namespace
