// Which API each upstream is sent a request in: the kinds keep their
// meaning, `apis:` says what an upstream serves where it is given, and
// what cannot be translated is refused naming the upstream.
#include <gtest/gtest.h>

#include "translate/translation.hpp"

namespace tokengate {
namespace {

TEST(AnswerDialect, KindsKeepTheirMeaningAndApisDecideWhereGiven) {
  auto upstream_of = [](config::provider_kind kind, std::optional<config::api_set> apis = {}) {
    config::upstream u;
    u.name = "u";
    u.kind = kind;
    u.apis = apis;
    return u;
  };
  using config::provider_kind;
  const auto any = upstream_of(provider_kind::any);
  const auto openai = upstream_of(provider_kind::openai);
  const auto anthropic = upstream_of(provider_kind::anthropic);
  const auto llama =
      upstream_of(provider_kind::any, config::api_set().add(config::api::chat_completions));
  const auto responses_only =
      upstream_of(provider_kind::openai, config::api_set().add(config::api::responses));
  constexpr auto chat = dialect::openai_chat, responses = dialect::openai_responses,
                 messages = dialect::anthropic_messages, completions = dialect::openai_completions,
                 embeddings = dialect::other;
  for (auto d : {chat, responses, messages, completions, embeddings}) {
    EXPECT_EQ(translate::answer_dialect(d, any), d);
    EXPECT_TRUE(translate::sent_as_is(d, any));
  }
  EXPECT_EQ(translate::answer_dialect(messages, openai), chat);
  for (auto d : {chat, responses, completions, embeddings})
    EXPECT_EQ(translate::answer_dialect(d, openai), d);
  EXPECT_EQ(translate::answer_dialect(chat, anthropic), messages);
  EXPECT_EQ(translate::answer_dialect(messages, anthropic), messages);
  EXPECT_EQ(translate::answer_dialect(responses, anthropic), messages);  // (through chat)
  for (auto d : {completions, embeddings}) EXPECT_FALSE(translate::answer_dialect(d, anthropic));
  EXPECT_EQ(translate::answer_dialect(responses, llama), chat);
  EXPECT_EQ(translate::answer_dialect(messages, llama), chat);
  EXPECT_EQ(translate::answer_dialect(chat, llama), chat);
  EXPECT_FALSE(translate::sent_as_is(responses, llama));
  for (auto d : {completions, embeddings}) EXPECT_FALSE(translate::answer_dialect(d, llama));
  // A Responses-only upstream takes chat directly, messages through chat.
  EXPECT_EQ(translate::answer_dialect(chat, responses_only), responses);
  EXPECT_EQ(translate::answer_dialect(messages, responses_only), responses);
  EXPECT_EQ(translate::answer_dialect(responses, responses_only), responses);
  for (auto d : {completions, embeddings})
    EXPECT_FALSE(translate::answer_dialect(d, responses_only));
  // Chat first, where an upstream serves it beside the others.
  const auto chat_and_messages =
      upstream_of(provider_kind::any,
                  config::api_set().add(config::api::chat_completions).add(config::api::messages));
  EXPECT_EQ(translate::answer_dialect(responses, chat_and_messages), chat);
  EXPECT_EQ(translate::unsupported_api(llama, "/v1/completions").message,
            "upstream 'u' serves chat_completions only: /v1/completions cannot be translated for "
            "it");
  EXPECT_EQ(translate::unsupported_api(anthropic, "/v1/completions").message,
            "upstream 'u' speaks Anthropic's Messages API only: /v1/completions cannot be "
            "translated to it (use /v1/chat/completions)");
}

}  // namespace
}  // namespace tokengate
