// The Responses API on an engine that speaks Anthropic's messages alone,
// and chat and Anthropic clients on an engine that serves the Responses
// API alone (demo engines started with apis: [messages] and apis:
// [responses]), over real sockets: each request reaches the engine in its
// API, each answer comes back in the client's; the limit, failures, errors
// and the metrics work on it as on any stream, read from the engine's own
// events.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "routing/policy.hpp"
#include "stream/observer.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test::responses_other_apis {
namespace {

namespace json = boost::json;

const std::string other_key = "sk-responses-other-apis";
const std::string auth = "Authorization: Bearer " + other_key + "\r\n";

// Engine 1 speaks messages alone (upstream claude, model claude), engine 2
// the Responses API alone (upstream gpt, model gpt).
fixture_options engines_of_one_api() {
  fixture_options o;
  config::demo_engine_settings messages, responses;
  messages.decode_tokens_per_second = responses.decode_tokens_per_second = 200;
  messages.apis = config::api_set().add(config::api::messages);
  responses.apis = config::api_set().add(config::api::responses);
  o.extra_engines = {messages, responses};
  o.more_upstreams =
      "  claude: {base_url: \"http://127.0.0.1:{engine1}/v1\", apis: [messages]}\n"
      "  gpt: {base_url: \"http://127.0.0.1:{engine2}/v1\", apis: [responses]}\n";
  o.top_extra =
      "routes:\n"
      "  - {name: claude, models: [claude], targets: [{upstream: claude}],\n"
      "     max_output_tokens: {default: 300, ceiling: 300, mode: clamp}, retry: {rate_limited: "
      "0}}\n"
      "  - {name: gpt, models: [gpt], targets: [{upstream: gpt}],\n"
      "     max_output_tokens: {default: 300, ceiling: 300, mode: clamp}, retry: {rate_limited: "
      "0}}\n"
      "keys:\n"
      "  - name: team\n"
      "    sha256: " +
      routing::sha256_hex(other_key) + "\n";
  return o;
}

http_response ask(const proxy_fixture& f, const std::string& path, const std::string& body,
                  const std::string& knobs) {
  http_client c(f.port());
  c.send(
      post_json(path, body, auth + "x-demo: {\"ttft_ms\":0,\"interval_ms\":0," + knobs + "}\r\n"));
  return read_response(c);
}

stream::stream_facts facts_as(dialect d, const std::string& body) {
  stream::stream_observer o(d, true);
  stream::sse_parser p;
  p.feed(body, o);
  return o.facts();
}

json::object last_sent(proxy_fixture& f, int engine) {
  return f.engine_stats_json(engine).at("last_request").as_object();
}

const std::string demo_tool =
    R"("tools":[{"type":"function","name":"demo_tool","parameters":{"type":"object"}}])";

TEST(ResponsesOnMessagesOnlyEngine, AStreamAndAWholeAnswer) {
  proxy_fixture f(engines_of_one_api());
  auto r = ask(f, "/v1/responses",
               R"({"model":"claude","stream":true,"instructions":"Be brief.","input":"hi",)"
               R"("max_output_tokens":50})",
               R"("tokens":7)");
  ASSERT_TRUE(r.complete);
  ASSERT_EQ(r.status, 200) << r.body;
  auto facts = facts_as(dialect::openai_responses, r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.terminator, "event: response.completed");
  EXPECT_EQ(facts.text_by_choice[0], "The quick brown fox jumps over the");
  EXPECT_EQ(facts.content_events, 7u);
  EXPECT_EQ(facts.output_tokens, 7);
  EXPECT_GT(facts.input_tokens.value_or(0), 0);
  auto sent = last_sent(f, 1);
  EXPECT_EQ(sent.at("target"), "/v1/messages");
  auto body = json::parse(sent.at("body").as_string()).as_object();
  EXPECT_EQ(body.at("system"), "Be brief.");
  EXPECT_EQ(body.at("max_tokens"), 50);

  auto whole = ask(f, "/v1/responses", R"({"model":"claude","input":"hi"})", R"("tokens":4)");
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto response = json::parse(whole.body).as_object();
  EXPECT_EQ(response.at("object"), "response");
  EXPECT_EQ(response.at("status"), "completed");
  EXPECT_EQ(response.at("output").at(0).at("content").at(0).at("text"), "The quick brown fox");
  EXPECT_EQ(response.at("usage").at("output_tokens"), 4);
  EXPECT_EQ(json::parse(last_sent(f, 1).at("body").as_string()).at("max_tokens"), 300);
}

TEST(ResponsesOnMessagesOnlyEngine, AToolCallLoop) {
  proxy_fixture f(engines_of_one_api());
  auto r = ask(f, "/v1/responses",
               R"({"model":"claude","stream":true,"input":"Call it.",)" + demo_tool + "}",
               R"("tokens":5,"tool_call":true)");
  auto facts = facts_as(dialect::openai_responses, r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  ASSERT_EQ(facts.tool_calls.size(), 1u) << r.body;
  EXPECT_EQ(facts.tool_calls[0].name, "demo_tool");
  EXPECT_EQ(facts.tool_calls[0].arguments, R"({"text": "The quick brown fox jumps"})");
  auto tools = json::parse(last_sent(f, 1).at("body").as_string()).at("tools");
  EXPECT_EQ(tools, json::parse(R"([{"name":"demo_tool","input_schema":{"type":"object"}}])"));

  auto whole = ask(f, "/v1/responses", R"({"model":"claude","input":"Call it.",)" + demo_tool + "}",
                   R"("tokens":5,"tool_call":true)");
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto call = json::parse(whole.body).at("output").at(0).as_object();
  EXPECT_EQ(call.at("type"), "function_call");
  EXPECT_EQ(json::parse(call.at("arguments").as_string()),
            json::parse(R"({"text":"The quick brown fox jumps"})"));
  auto call_id = std::string(call.at("call_id").as_string());
  auto next = ask(f, "/v1/responses",
                  R"({"model":"claude","input":[{"role":"user","content":"Call it."},)"
                  R"({"type":"function_call","call_id":")" +
                      call_id + R"(","name":"demo_tool","arguments":"{}"},)" +
                      R"({"type":"function_call_output","call_id":")" + call_id +
                      R"(","output":"done"}],)" + demo_tool + "}",
                  R"("tokens":2)");
  ASSERT_EQ(next.status, 200) << next.body;
  auto messages = json::parse(last_sent(f, 1).at("body").as_string()).at("messages");
  EXPECT_EQ(messages.at(1).at("content").at(0).at("id").as_string(), call_id);
  EXPECT_EQ(messages.at(2).at("content").at(0).at("type"), "tool_result");
  EXPECT_EQ(messages.at(2).at("content").at(0).at("tool_use_id").as_string(), call_id);
}

TEST(ResponsesOnMessagesOnlyEngine, ACutAFailureAndAnError) {
  proxy_fixture f(engines_of_one_api());
  auto cut = ask(f, "/v1/responses",
                 R"({"model":"claude","stream":true,"max_output_tokens":4,"input":"hi"})",
                 R"("tokens":50,"ignore_limit":true)");
  auto facts = facts_as(dialect::openai_responses, cut.body);
  EXPECT_EQ(facts.content_events, 4u);
  EXPECT_EQ(facts.terminator, "event: response.incomplete") << cut.body;
  EXPECT_EQ(facts.output_tokens, 4);
  for (std::string fault : {R"("error_after":3)", R"("reset_after":3)"}) {
    SCOPED_TRACE(fault);
    auto r = ask(f, "/v1/responses", R"({"model":"claude","stream":true,"input":"hi"})",
                 R"("tokens":10,)" + fault);
    ASSERT_TRUE(r.complete);
    facts = facts_as(dialect::openai_responses, r.body);
    EXPECT_EQ(facts.content_events, 3u);
    EXPECT_EQ(facts.terminator, "event: response.failed") << r.body;
  }
  auto limited = ask(f, "/v1/responses", R"({"model":"claude","input":"hi"})", R"("status":429)");
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(json::parse(limited.body).at("error").at("code"), "rate_limit_exceeded")
      << limited.body;
  auto refused = ask(f, "/v1/responses",
                     R"({"model":"claude","input":"hi","text":{"format":{"type":"json_object"}}})",
                     R"("tokens":1)");
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(error_code_of(refused), "unsupported_parameter");
  EXPECT_NE(refused.body.find("text.format"), std::string::npos) << refused.body;
}

TEST(ChatOnResponsesOnlyEngine, AStreamAToolCallAndAWholeAnswer) {
  proxy_fixture f(engines_of_one_api());
  auto r =
      ask(f, "/v1/chat/completions",
          R"({"model":"gpt","stream":true,"stream_options":{"include_usage":true},)"
          R"("messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]})",
          R"("tokens":7)");
  ASSERT_EQ(r.status, 200) << r.body;
  auto facts = facts_as(dialect::openai_chat, r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.text_by_choice[0], "The quick brown fox jumps over the");
  EXPECT_EQ(facts.finish_reason, "stop");
  EXPECT_EQ(facts.output_tokens, 7);
  auto sent = last_sent(f, 2);
  EXPECT_EQ(sent.at("target"), "/v1/responses");
  auto body = json::parse(sent.at("body").as_string()).as_object();
  EXPECT_EQ(body.at("input"), json::parse(R"([{"role":"system","content":"Be brief."},
    {"role":"user","content":"hi"}])"));
  EXPECT_EQ(body.at("store"), false);
  EXPECT_EQ(body.at("max_output_tokens"), 300);

  auto call = ask(f, "/v1/chat/completions",
                  R"({"model":"gpt","stream":true,"messages":[{"role":"user","content":"go"}],)"
                  R"("tools":[{"type":"function","function":{"name":"demo_tool"}}]})",
                  R"("tokens":5,"tool_call":true)");
  facts = facts_as(dialect::openai_chat, call.body);
  EXPECT_TRUE(facts.ended_properly()) << call.body;
  EXPECT_EQ(facts.finish_reason, "tool_calls");
  ASSERT_EQ(facts.tool_calls.size(), 1u);
  EXPECT_EQ(facts.tool_calls[0].arguments, R"({"text": "The quick brown fox jumps"})");

  auto whole =
      ask(f, "/v1/chat/completions",
          R"({"model":"gpt","messages":[{"role":"user","content":"hi"}]})", R"("tokens":4)");
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto completion = json::parse(whole.body).as_object();
  EXPECT_EQ(completion.at("object"), "chat.completion");
  EXPECT_EQ(completion.at("choices").at(0).at("message").at("content"), "The quick brown fox");
  EXPECT_EQ(completion.at("usage").at("completion_tokens"), 4);
}

TEST(ChatOnResponsesOnlyEngine, ACutAFailureAndTheMetrics) {
  proxy_fixture f(engines_of_one_api());
  auto cut = ask(f, "/v1/chat/completions",
                 R"({"model":"gpt","stream":true,"max_tokens":4,)"
                 R"("messages":[{"role":"user","content":"hi"}]})",
                 R"("tokens":50,"ignore_limit":true)");
  auto facts = facts_as(dialect::openai_chat, cut.body);
  EXPECT_EQ(facts.content_events, 4u);
  EXPECT_EQ(facts.finish_reason, "length") << cut.body;
  EXPECT_TRUE(facts.ended_properly());
  auto failed = ask(f, "/v1/chat/completions",
                    R"({"model":"gpt","stream":true,"messages":[{"role":"user","content":"hi"}]})",
                    R"("tokens":10,"error_after":3)");
  facts = facts_as(dialect::openai_chat, failed.body);
  EXPECT_EQ(facts.content_events, 3u);
  EXPECT_TRUE(facts.error) << failed.body;
  EXPECT_NE(failed.body.find("the demo engine failed"), std::string::npos) << failed.body;
  auto limited =
      ask(f, "/v1/chat/completions",
          R"({"model":"gpt","messages":[{"role":"user","content":"hi"}]})", R"("status":429)");
  EXPECT_EQ(limited.status, 429);
  auto refused = ask(f, "/v1/chat/completions",
                     R"({"model":"gpt","stop":["x"],"messages":[{"role":"user","content":"hi"}]})",
                     R"("tokens":1)");
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("'stop'"), std::string::npos) << refused.body;
  // The output tokens counted from the engine's own events: 4 + 3.
  EXPECT_TRUE(wait_until(
      [&] {
        auto page = http_get(f.admin_port(), "/metrics").body;
        return page.find(R"(tokengate_tokens_total{route="gpt",model="gpt",upstream="gpt",)"
                         R"(type="output"} 7)") != std::string::npos;
      },
      2s, "the output tokens to be counted"));
}

TEST(MessagesOnResponsesOnlyEngine, AStreamACallACutAndAFailure) {
  proxy_fixture f(engines_of_one_api());
  auto r = ask(f, "/v1/messages",
               R"({"model":"gpt","stream":true,"max_tokens":100,"system":"Be brief.",)"
               R"("messages":[{"role":"user","content":"hi"}]})",
               R"("tokens":7)");
  ASSERT_EQ(r.status, 200) << r.body;
  auto facts = facts_as(dialect::anthropic_messages, r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.text_by_choice[0], "The quick brown fox jumps over the");
  EXPECT_EQ(facts.finish_reason, "end_turn");
  EXPECT_EQ(facts.output_tokens, 7);
  auto body = json::parse(last_sent(f, 2).at("body").as_string()).as_object();
  EXPECT_EQ(body.at("max_output_tokens"), 100);
  EXPECT_EQ(body.at("input").at(0), json::parse(R"({"role":"system","content":"Be brief."})"));

  auto call = ask(f, "/v1/messages",
                  R"({"model":"gpt","max_tokens":100,"messages":[{"role":"user","content":"go"}],)"
                  R"("tools":[{"name":"demo_tool","input_schema":{"type":"object"}}]})",
                  R"("tokens":5,"tool_call":true)");
  ASSERT_EQ(call.status, 200) << call.body;
  auto message = json::parse(call.body).as_object();
  EXPECT_EQ(message.at("stop_reason"), "tool_use");
  EXPECT_EQ(message.at("content").at(0).at("type"), "tool_use");
  EXPECT_EQ(message.at("content").at(0).at("input"),
            json::parse(R"({"text":"The quick brown fox jumps"})"));

  auto cut = ask(f, "/v1/messages",
                 R"({"model":"gpt","stream":true,"max_tokens":4,)"
                 R"("messages":[{"role":"user","content":"hi"}]})",
                 R"("tokens":50,"ignore_limit":true)");
  facts = facts_as(dialect::anthropic_messages, cut.body);
  EXPECT_EQ(facts.content_events, 4u);
  EXPECT_EQ(facts.finish_reason, "max_tokens") << cut.body;
  auto failed = ask(f, "/v1/messages",
                    R"({"model":"gpt","stream":true,"max_tokens":100,)"
                    R"("messages":[{"role":"user","content":"hi"}]})",
                    R"("tokens":10,"error_after":3)");
  facts = facts_as(dialect::anthropic_messages, failed.body);
  EXPECT_EQ(facts.content_events, 3u);
  EXPECT_TRUE(facts.error) << failed.body;
  auto limited =
      ask(f, "/v1/messages",
          R"({"model":"gpt","max_tokens":5,"messages":[{"role":"user","content":"hi"}]})",
          R"("status":429)");
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(json::parse(limited.body).at("error").at("type"), "rate_limit_error") << limited.body;
}

// Reasoning, in every direction: the engine thinks its first three tokens
// ("The quick brown") in its own API's shape (a thinking block, a
// reasoning item's summary), and each client reads them as its own (a
// reasoning item's summary, reasoning_content, a thinking block), streamed
// and whole; the text after them stays text.
const std::string thinks = R"("tokens":7,"reasoning_tokens":3)";
const std::string thought = "The quick brown";
const std::string said = " fox jumps over the";

TEST(ReasoningAcrossApis, AResponsesClientOnAMessagesEngine) {
  proxy_fixture f(engines_of_one_api());
  auto r = ask(f, "/v1/responses", R"({"model":"claude","stream":true,"input":"hi"})", thinks);
  ASSERT_EQ(r.status, 200) << r.body;
  auto facts = facts_as(dialect::openai_responses, r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.reasoning_text, thought) << r.body;
  EXPECT_EQ(facts.text_by_choice[0], said);
  EXPECT_NE(r.body.find("event: response.reasoning_summary_text.delta"), std::string::npos);
  EXPECT_NE(r.body.find("event: response.reasoning_summary_text.done"), std::string::npos);
  EXPECT_EQ(last_sent(f, 1).at("target"), "/v1/messages");

  auto whole = ask(f, "/v1/responses", R"({"model":"claude","input":"hi"})", thinks);
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto output = json::parse(whole.body).at("output").as_array();
  ASSERT_EQ(output.size(), 2u) << whole.body;
  EXPECT_EQ(output[0].at("type"), "reasoning");
  EXPECT_EQ(output[0].at("summary").at(0).at("text").as_string(), thought);
  EXPECT_EQ(output[1].at("content").at(0).at("text").as_string(), said);
}

TEST(ReasoningAcrossApis, AChatClientOnAMessagesEngine) {
  proxy_fixture f(engines_of_one_api());
  const std::string chat = R"({"model":"claude","messages":[{"role":"user","content":"hi"}])";
  auto r = ask(f, "/v1/chat/completions", chat + R"(,"stream":true})", thinks);
  ASSERT_EQ(r.status, 200) << r.body;
  auto facts = facts_as(dialect::openai_chat, r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.reasoning_text, thought) << r.body;
  EXPECT_EQ(facts.text_by_choice[0], said);

  auto whole = ask(f, "/v1/chat/completions", chat + "}", thinks);
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto message = json::parse(whole.body).at("choices").at(0).at("message");
  EXPECT_EQ(message.at("reasoning_content").as_string(), thought) << whole.body;
  EXPECT_EQ(message.at("content").as_string(), said);
}

TEST(ReasoningAcrossApis, AnAnthropicClientOnItsOwnEngineGetsTheSignedThinking) {
  proxy_fixture f(engines_of_one_api());
  const std::string messages =
      R"({"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}])";
  auto r = ask(f, "/v1/messages", messages + R"(,"stream":true})", thinks);
  ASSERT_EQ(r.status, 200) << r.body;
  auto facts = facts_as(dialect::anthropic_messages, r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.reasoning_text, thought) << r.body;
  EXPECT_EQ(facts.text_by_choice[0], said);
  EXPECT_NE(r.body.find(R"("type":"signature_delta")"), std::string::npos) << r.body;

  auto whole = ask(f, "/v1/messages", messages + "}", thinks);
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto content = json::parse(whole.body).at("content").as_array();
  ASSERT_EQ(content.size(), 2u) << whole.body;
  EXPECT_EQ(content[0].at("type"), "thinking");
  EXPECT_EQ(content[0].at("thinking").as_string(), thought);
  EXPECT_FALSE(content[0].at("signature").as_string().empty());
  EXPECT_EQ(content[1].at("text").as_string(), said);
}

TEST(ReasoningAcrossApis, AChatClientOnAResponsesEngine) {
  proxy_fixture f(engines_of_one_api());
  const std::string chat = R"({"model":"gpt","messages":[{"role":"user","content":"hi"}])";
  auto r = ask(f, "/v1/chat/completions", chat + R"(,"stream":true})", thinks);
  ASSERT_EQ(r.status, 200) << r.body;
  auto facts = facts_as(dialect::openai_chat, r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.reasoning_text, thought) << r.body;
  EXPECT_EQ(facts.text_by_choice[0], said);
  EXPECT_EQ(last_sent(f, 2).at("target"), "/v1/responses");

  auto whole = ask(f, "/v1/chat/completions", chat + "}", thinks);
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto message = json::parse(whole.body).at("choices").at(0).at("message");
  EXPECT_EQ(message.at("reasoning_content").as_string(), thought) << whole.body;
  EXPECT_EQ(message.at("content").as_string(), said);
}

TEST(ReasoningAcrossApis, AnAnthropicClientOnAResponsesEngine) {
  proxy_fixture f(engines_of_one_api());
  const std::string messages =
      R"({"model":"gpt","max_tokens":100,"messages":[{"role":"user","content":"hi"}])";
  auto r = ask(f, "/v1/messages", messages + R"(,"stream":true})", thinks);
  ASSERT_EQ(r.status, 200) << r.body;
  auto facts = facts_as(dialect::anthropic_messages, r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.reasoning_text, thought) << r.body;
  EXPECT_EQ(facts.text_by_choice[0], said);

  auto whole = ask(f, "/v1/messages", messages + "}", thinks);
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto content = json::parse(whole.body).at("content").as_array();
  ASSERT_EQ(content.size(), 2u) << whole.body;
  EXPECT_EQ(content[0].at("thinking").as_string(), thought);
  EXPECT_EQ(content[1].at("text").as_string(), said);
}

TEST(ReasoningAcrossApis, AResponsesClientOnItsOwnEngine) {
  proxy_fixture f(engines_of_one_api());
  auto r = ask(f, "/v1/responses", R"({"model":"gpt","stream":true,"input":"hi"})", thinks);
  ASSERT_EQ(r.status, 200) << r.body;
  auto facts = facts_as(dialect::openai_responses, r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.reasoning_text, thought) << r.body;
  EXPECT_EQ(facts.text_by_choice[0], said);
  auto completed = r.body.substr(r.body.find("event: response.completed"));
  auto response = json::parse(completed.substr(completed.find('{'))).at("response");
  EXPECT_EQ(response.at("output").at(0).at("type"), "reasoning");
  EXPECT_EQ(response.at("usage").at("output_tokens_details").at("reasoning_tokens"), 3);
}

}  // namespace
}  // namespace tokengate::test::responses_other_apis
