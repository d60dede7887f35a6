// Requests for a Responses-only upstream (chat and Anthropic clients) and
// Responses requests for an Anthropic upstream: what each member becomes,
// and what is refused with a 400 naming the member as the client sent it.
// The routed path (translate::request_for_target) is what the proxy runs.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "routing/json_scan.hpp"
#include "translate/request.hpp"
#include "translate/translation.hpp"

namespace tokengate {
namespace {

namespace json = boost::json;
using translate::request_options;

json::object responses_of_chat_request(std::string_view chat, request_options options = {}) {
  auto out = translate::responses_request_from_chat(chat, options);
  if (auto* e = std::get_if<request_error>(&out)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return json::parse(std::get<translate::translated_request>(out).body).as_object();
}

std::string chat_refusal(std::string_view body) {
  auto out = translate::responses_request_from_chat(body, {});
  auto* e = std::get_if<request_error>(&out);
  if (!e) return "(accepted)";
  EXPECT_EQ(e->status, 400u);
  return e->message;
}

TEST(ChatToResponses, MessagesToolsAndOptions) {
  auto r = responses_of_chat_request(R"({"model":"gpt-5","stream":true,
    "stream_options":{"include_usage":true},"temperature":0.2,"top_p":0.9,"user":"u",
    "max_completion_tokens":50,"parallel_tool_calls":false,"reasoning_effort":"high","n":1,
    "store":true,"metadata":{"k":"v"},"seed":null,"stop":null,
    "messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"What is this?"},
        {"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]},
      {"role":"assistant","content":"Let me see.","reasoning_content":"hm","tool_calls":[
        {"id":"call_1","type":"function","function":{"name":"look","arguments":"{\"a\":1}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"a cat"}]}],
    "tools":[{"type":"function","function":{"name":"look","description":"d",
      "parameters":{"type":"object"}}}],
    "tool_choice":{"type":"function","function":{"name":"look"}},
    "response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"},
      "strict":true}}})");
  EXPECT_EQ(r.at("model"), "gpt-5");
  EXPECT_EQ(r.at("stream"), true);
  EXPECT_EQ(r.at("max_output_tokens"), 50);
  EXPECT_EQ(r.at("parallel_tool_calls"), false);
  EXPECT_EQ(r.at("reasoning"), json::parse(R"({"effort":"high"})"));
  EXPECT_EQ(r.at("store"), false);  // (stateless, whatever the chat client said)
  EXPECT_EQ(r.at("metadata"), json::parse(R"({"k":"v"})"));
  EXPECT_EQ(r.at("user"), "u");
  for (const char* gone : {"messages", "stream_options", "n", "seed", "stop", "reasoning_effort",
                           "max_completion_tokens", "response_format"})
    EXPECT_FALSE(r.contains(gone)) << gone;
  EXPECT_EQ(r.at("input"), json::parse(R"([
    {"role":"system","content":"Be brief."},
    {"role":"user","content":[{"type":"input_text","text":"What is this?"},
      {"type":"input_image","image_url":"https://x/y.png","detail":"low"}]},
    {"role":"assistant","content":"Let me see."},
    {"type":"function_call","call_id":"call_1","name":"look","arguments":"{\"a\":1}"},
    {"type":"function_call_output","call_id":"call_1","output":"a cat"}])"));
  EXPECT_EQ(r.at("tools"), json::parse(R"([{"type":"function","name":"look","description":"d",
    "parameters":{"type":"object"},"strict":false}])"));
  EXPECT_EQ(r.at("tool_choice"), json::parse(R"({"type":"function","name":"look"})"));
  EXPECT_EQ(r.at("text"), json::parse(R"({"format":{"type":"json_schema","name":"s",
    "schema":{"type":"object"},"strict":true}})"));
  // No limit asked: the route's.
  EXPECT_EQ(
      responses_of_chat_request(R"({"model":"m","messages":[]})", {64}).at("max_output_tokens"),
      64);
  EXPECT_FALSE(
      responses_of_chat_request(R"({"model":"m","messages":[]})").contains("max_output_tokens"));
}

TEST(ChatToResponses, WhatHasNoCounterpartIsRefusedByName) {
  EXPECT_EQ(chat_refusal(R"({"model":"m","messages":[],"stop":["x"]})"),
            "'stop' has no counterpart in OpenAI's Responses API, which this model's upstream "
            "speaks");
  EXPECT_NE(chat_refusal(R"({"model":"m","messages":[],"n":2})").find("n other than 1"),
            std::string::npos);
  for (const char* member : {"seed", "logprobs", "logit_bias", "presence_penalty", "audio",
                             "prediction", "functions", "web_search_options"}) {
    auto body = std::string(R"({"model":"m","messages":[],")") + member + R"(":1})";
    EXPECT_NE(chat_refusal(body).find(std::string("'") + member + "'"), std::string::npos)
        << member;
  }
  EXPECT_NE(chat_refusal(R"({"model":"m","messages":[{"role":"function","content":"x"}]})")
                .find("messages[0] with role 'function'"),
            std::string::npos);
  EXPECT_NE(chat_refusal(R"({"model":"m","messages":[],"tools":[{"type":"custom"}]})")
                .find("a tool that is not a function"),
            std::string::npos);
  EXPECT_NE(chat_refusal(R"({"model":"m","messages":[{"role":"user","content":[
    {"type":"input_audio","input_audio":{}}]}]})")
                .find("part of type 'input_audio'"),
            std::string::npos);
  EXPECT_EQ(chat_refusal("not json"), "request body is not a JSON object");
  EXPECT_EQ(chat_refusal(R"({"model":"m"})"), "messages is required");
}

// The whole path a routed request takes: the policy's edits, then the
// translation for the target's upstream, sent where that upstream serves it.
struct routed_for {
  config::upstream upstream;
  config::route_target target;
  config::route route;
  routing::routed_request routed;
  routed_for(config::api_set apis, std::optional<long long> limit = {}) {
    upstream.name = "u";
    upstream.kind = config::provider_kind::any;
    upstream.apis = apis;
    target.upstream = "u";
    routed.route = &route;
    routed.output_limit = limit;
  }
  std::variant<translate::target_request, request_error> request(std::string_view body,
                                                                 dialect client,
                                                                 std::string_view path) {
    routing::scan_error error;
    auto scan = routing::scan_object(body, error, 64);
    if (scan) routed.scan = *scan;
    return translate::request_for_target(body, client, path, routed, target, upstream, false);
  }
};

json::object sent_body(std::variant<translate::target_request, request_error> made,
                       std::string_view path, dialect answers_in) {
  if (auto* e = std::get_if<request_error>(&made)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  auto& t = std::get<translate::target_request>(made);
  EXPECT_TRUE(t.translation);
  if (!t.translation) return {};
  EXPECT_EQ(t.translation->target, path);
  EXPECT_EQ(t.translation->answers_in, answers_in);
  EXPECT_EQ(t.edits.size(), 1u);
  return json::parse(t.edits.at(0).replacement).as_object();
}

std::string refusal_of(std::variant<translate::target_request, request_error> made) {
  auto* e = std::get_if<request_error>(&made);
  if (!e) return "(accepted)";
  EXPECT_EQ(e->status, 400u);
  EXPECT_EQ(e->code, "unsupported_parameter");
  return e->message;
}

TEST(ResponsesToMessages, ATurnWithACallAndItsOutput) {
  routed_for messages_only(config::api_set().add(config::api::messages));
  auto m = sent_body(messages_only.request(R"({"model":"claude","stream":true,
    "instructions":"Be brief.","temperature":0.5,"max_output_tokens":100,
    "input":[{"role":"user","content":"Weather in Paris?"},
      {"type":"reasoning","id":"rs_1","summary":[]},
      {"type":"function_call","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"},
      {"type":"function_call_output","call_id":"call_1","output":"sunny"}],
    "tools":[{"type":"function","name":"weather","parameters":{"type":"object"}}],
    "tool_choice":"required","parallel_tool_calls":false,"store":false})",
                                           dialect::openai_responses, "/v1/responses"),
                     "/v1/messages", dialect::anthropic_messages);
  EXPECT_EQ(m.at("model"), "claude");
  EXPECT_EQ(m.at("system"), "Be brief.");
  EXPECT_EQ(m.at("max_tokens"), 100);
  EXPECT_EQ(m.at("stream"), true);
  EXPECT_EQ(m.at("messages"), json::parse(R"([
    {"role":"user","content":[{"type":"text","text":"Weather in Paris?"}]},
    {"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"weather",
      "input":{"city":"Paris"}}]},
    {"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1",
      "content":[{"type":"text","text":"sunny"}]}]}])"));
  EXPECT_EQ(m.at("tools"), json::parse(R"([{"name":"weather","input_schema":{"type":"object"}}])"));
  EXPECT_EQ(m.at("tool_choice"), json::parse(R"({"type":"any","disable_parallel_tool_use":true})"));
  // No limit asked: the route's (Anthropic's API requires one).
  routed_for limited(config::api_set().add(config::api::messages), 256);
  EXPECT_EQ(sent_body(limited.request(R"({"model":"c","input":"hi"})", dialect::openai_responses,
                                      "/v1/responses"),
                      "/v1/messages", dialect::anthropic_messages)
                .at("max_tokens"),
            256);
}

TEST(ResponsesToMessages, RefusalsNameTheResponsesMember) {
  routed_for messages_only(config::api_set().add(config::api::messages));
  auto refused = [&](std::string_view body) {
    return refusal_of(messages_only.request(body, dialect::openai_responses, "/v1/responses"));
  };
  EXPECT_NE(refused(R"({"model":"c","input":"hi","previous_response_id":"resp_1"})")
                .find("'previous_response_id'"),
            std::string::npos);
  EXPECT_NE(
      refused(R"({"model":"c","input":"hi","tools":[{"type":"web_search"}]})").find("'web_search'"),
      std::string::npos);
  EXPECT_EQ(refused(R"({"model":"c","input":"hi","text":{"format":{"type":"json_schema",
    "name":"s","schema":{}}}})"),
            "text.format other than text has no counterpart in Anthropic's Messages API, which "
            "this model's upstream speaks");
  EXPECT_EQ(refused(R"({"model":"c","input":"hi","text":{"format":{"type":"text"}}})"),
            "(accepted)");
}

TEST(MessagesToResponses, AnAnthropicRequestThroughChat) {
  routed_for responses_only(config::api_set().add(config::api::responses));
  auto r = sent_body(responses_only.request(R"({"model":"gpt-5","max_tokens":200,"stream":true,
    "system":[{"type":"text","text":"Be brief."}],"thinking":{"type":"enabled","budget_tokens":1024},
    "messages":[{"role":"user","content":"Weather?"},
      {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"weather",
        "input":{"city":"Paris"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}],
    "tools":[{"name":"weather","input_schema":{"type":"object"}}]})",
                                            dialect::anthropic_messages, "/v1/messages"),
                     "/v1/responses", dialect::openai_responses);
  EXPECT_EQ(r.at("max_output_tokens"), 200);
  EXPECT_EQ(r.at("store"), false);
  EXPECT_EQ(r.at("stream"), true);
  EXPECT_FALSE(r.contains("stream_options"));
  EXPECT_EQ(r.at("input"), json::parse(R"([{"role":"system","content":"Be brief."},
    {"role":"user","content":"Weather?"},
    {"type":"function_call","call_id":"toolu_1","name":"weather","arguments":"{\"city\":\"Paris\"}"},
    {"type":"function_call_output","call_id":"toolu_1","output":"sunny"}])"));
  EXPECT_EQ(r.at("tools").at(0).at("name"), "weather");
  EXPECT_EQ(refusal_of(responses_only.request(R"({"model":"m","max_tokens":5,"stop_sequences":["x"],
    "messages":[{"role":"user","content":"hi"}]})",
                                              dialect::anthropic_messages, "/v1/messages")),
            "'stop_sequences' has no counterpart in OpenAI's Responses API, which this model's "
            "upstream speaks");
  // A chat client straight to it.
  auto c = sent_body(
      responses_only.request(R"({"model":"gpt-5","messages":[{"role":"user","content":"hi"}]})",
                             dialect::openai_chat, "/v1/chat/completions"),
      "/v1/responses", dialect::openai_responses);
  EXPECT_EQ(c.at("input"), json::parse(R"([{"role":"user","content":"hi"}])"));
  // Completions still go nowhere but where they are served.
  auto completions = responses_only.request(R"({"model":"m","prompt":"x"})",
                                            dialect::openai_completions, "/v1/completions");
  ASSERT_TRUE(std::holds_alternative<request_error>(completions));
  EXPECT_EQ(std::get<request_error>(completions).code, "unsupported_api");
}

}  // namespace
}  // namespace tokengate
