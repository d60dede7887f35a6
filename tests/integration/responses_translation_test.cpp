// OpenAI's Responses API on an engine that serves chat completions alone
// (a demo engine started with apis: [chat_completions], as llama.cpp's
// server is), over real sockets: the request goes to /v1/chat/completions
// translated, the answer comes back as Responses events or a response
// object; the limit, failures, errors, cancellation, the budget and the
// metrics work on it as on any stream, read from the engine's own events.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "routing/policy.hpp"
#include "stream/observer.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test::responses_translation {
namespace {

namespace json = boost::json;

const std::string llama_key = "sk-responses-translation";
const std::string key_header = "Authorization: Bearer " + llama_key + "\r\n";

// The demo engine as llama.cpp's server (engine 1), behind an upstream
// that says so, with a route and a key with a budget.
fixture_options chat_only_engine() {
  fixture_options o;
  config::demo_engine_settings engine;
  engine.decode_tokens_per_second = 200;
  engine.apis = config::api_set().add(config::api::chat_completions);
  o.extra_engines.push_back(engine);
  o.more_upstreams =
      "  llama: {base_url: \"http://127.0.0.1:{engine1}/v1\", apis: [chat_completions]}\n";
  o.top_extra =
      "routes:\n"
      "  - {name: llama, models: [llama], targets: [{upstream: llama}],\n"
      "     max_output_tokens: {default: 300, ceiling: 300, mode: clamp},\n"
      "     retry: {rate_limited: 0}}\n"
      "keys:\n"
      "  - name: team\n"
      "    sha256: " +
      routing::sha256_hex(llama_key) +
      "\n"
      "    budget: {tokens_per_minute: 1000000}\n";
  return o;
}

std::string demo_knobs(const std::string& knobs) {
  return key_header + "x-demo: {\"ttft_ms\":0,\"interval_ms\":0," + knobs + "}\r\n";
}

http_response respond(const proxy_fixture& f, const std::string& body, const std::string& knobs) {
  http_client c(f.port());
  c.send(post_json("/v1/responses", body, demo_knobs(knobs)));
  return read_response(c);
}

stream::stream_facts responses_facts(const std::string& body) {
  stream::stream_observer o(dialect::openai_responses, true);
  stream::sse_parser p;
  p.feed(body, o);
  return o.facts();
}

json::object sent_to_engine(proxy_fixture& f) {
  return f.engine_stats_json(1).at("last_request").as_object();
}

// One sample of the llama route's series on /metrics, or -1.
double llama_sample(const proxy_fixture& f, const std::string& name,
                    const std::string& extra = "") {
  auto page = http_get(f.admin_port(), "/metrics").body;
  auto line = "\n" + name + R"({route="llama",model="llama",upstream="llama")" + extra + "} ";
  auto at = page.find(line);
  return at == std::string::npos ? -1 : std::stod(page.substr(at + line.size()));
}

TEST(ResponsesOnChatOnlyEngine, AStreamIsTranslatedBothWays) {
  proxy_fixture f(chat_only_engine());
  auto r = respond(f,
                   R"({"model":"llama","stream":true,"instructions":"Be brief.","input":"hi",)"
                   R"("max_output_tokens":50,"store":false})",
                   R"("tokens":7)");
  ASSERT_TRUE(r.complete);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"].substr(0, 17), "text/event-stream");
  auto facts = responses_facts(r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.finish_reason, "completed");
  EXPECT_EQ(facts.text_by_choice[0], "The quick brown fox jumps over the");
  EXPECT_EQ(facts.content_events, 7u);
  EXPECT_EQ(facts.output_tokens, 7);
  EXPECT_GT(facts.input_tokens.value_or(0), 0);
  EXPECT_EQ(r.body.rfind("event: response.created", 0), 0u) << r.body;
  // What the engine was sent: chat completions, usage asked for.
  auto sent = sent_to_engine(f);
  EXPECT_EQ(sent.at("target"), "/v1/chat/completions");
  auto body = json::parse(sent.at("body").as_string()).as_object();
  EXPECT_EQ(body.at("messages"), json::parse(R"([{"role":"system","content":"Be brief."},
    {"role":"user","content":"hi"}])"));
  EXPECT_EQ(body.at("stream_options"), json::parse(R"({"include_usage":true})"));
  EXPECT_EQ(body.at("max_tokens"), 50);
}

TEST(ResponsesOnChatOnlyEngine, AWholeAnswerIsAResponseObject) {
  proxy_fixture f(chat_only_engine());
  auto r =
      respond(f, R"({"model":"llama","input":[{"role":"user","content":"hi"}]})", R"("tokens":4)");
  ASSERT_EQ(r.status, 200) << r.body;
  auto response = json::parse(r.body).as_object();
  EXPECT_EQ(response.at("object"), "response");
  EXPECT_EQ(response.at("status"), "completed");
  EXPECT_TRUE(response.at("id").as_string().starts_with("resp_")) << response.at("id");
  const auto& message = response.at("output").at(0).as_object();
  EXPECT_EQ(message.at("type"), "message");
  EXPECT_EQ(message.at("content").at(0).at("text"), "The quick brown fox");
  EXPECT_EQ(response.at("usage").at("output_tokens"), 4);
  EXPECT_EQ(response.at("usage").at("total_tokens").to_number<long long>(),
            response.at("usage").at("input_tokens").to_number<long long>() + 4);
  // The route's default limit, in chat's spelling.
  EXPECT_EQ(json::parse(sent_to_engine(f).at("body").as_string()).at("max_tokens"), 300);
}

// The engine's reasoning_content (its first three tokens) is the
// reasoning item's summary, streamed as summary text deltas and whole.
TEST(ResponsesOnChatOnlyEngine, ReasoningIsAReasoningItemsSummary) {
  proxy_fixture f(chat_only_engine());
  auto r = respond(f, R"({"model":"llama","stream":true,"input":"hi"})",
                   R"("tokens":7,"reasoning_tokens":3)");
  ASSERT_EQ(r.status, 200) << r.body;
  auto facts = responses_facts(r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.reasoning_text, "The quick brown") << r.body;
  EXPECT_EQ(facts.text_by_choice[0], " fox jumps over the");
  EXPECT_NE(r.body.find("event: response.reasoning_summary_text.delta"), std::string::npos);
  EXPECT_EQ(sent_to_engine(f).at("target"), "/v1/chat/completions");

  auto whole =
      respond(f, R"({"model":"llama","input":"hi"})", R"("tokens":7,"reasoning_tokens":3)");
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto output = json::parse(whole.body).at("output").as_array();
  ASSERT_EQ(output.size(), 2u) << whole.body;
  EXPECT_EQ(output[0].at("summary").at(0).at("text"), "The quick brown");
  EXPECT_EQ(output[1].at("content").at(0).at("text"), " fox jumps over the");
  // the engine's completion_tokens_details, in the Responses API's words
  auto usage = json::parse(whole.body).at("usage");
  EXPECT_EQ(usage.at("output_tokens_details").at("reasoning_tokens"), 3) << whole.body;
  EXPECT_EQ(usage.at("output_tokens"), 7);
}

TEST(ResponsesOnChatOnlyEngine, AToolCallAndItsOutputGoRoundTheLoop) {
  proxy_fixture f(chat_only_engine());
  const std::string tools =
      R"("tools":[{"type":"function","name":"demo_tool","parameters":{"type":"object"}}])";
  auto r = respond(f, R"({"model":"llama","stream":true,"input":"Call it.",)" + tools + "}",
                   R"("tokens":5,"tool_call":true)");
  ASSERT_TRUE(r.complete);
  auto facts = responses_facts(r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  ASSERT_EQ(facts.tool_calls.size(), 1u) << r.body;
  EXPECT_EQ(facts.tool_calls[0].name, "demo_tool");
  EXPECT_EQ(facts.tool_calls[0].arguments, R"({"text": "The quick brown fox jumps"})");
  EXPECT_EQ(facts.tool_call_events, 6u);  // the call opened, then five fragments
  // Whole, the same call is a function_call item.
  auto whole = respond(f, R"({"model":"llama","input":"Call it.",)" + tools + "}",
                       R"("tokens":5,"tool_call":true)");
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto call = json::parse(whole.body).at("output").at(0).as_object();
  EXPECT_EQ(call.at("type"), "function_call");
  EXPECT_EQ(call.at("name"), "demo_tool");
  auto call_id = std::string(call.at("call_id").as_string());
  // The call and its output sent back: a tool call and a tool message.
  auto next = respond(f,
                      R"({"model":"llama","input":[{"role":"user","content":"Call it."},)"
                      R"({"type":"function_call","call_id":")" +
                          call_id +
                          R"(","name":"demo_tool","arguments":"{}"},)"
                          R"({"type":"function_call_output","call_id":")" +
                          call_id + R"(","output":"done"}],)" + tools + "}",
                      R"("tokens":2)");
  ASSERT_EQ(next.status, 200) << next.body;
  auto messages = json::parse(sent_to_engine(f).at("body").as_string()).at("messages");
  EXPECT_EQ(messages.at(1).at("tool_calls").at(0).at("id").as_string(), call_id);
  EXPECT_EQ(messages.at(2),
            (json::object{{"role", "tool"}, {"tool_call_id", call_id}, {"content", "done"}}));
}

// A body long enough to go upstream while it arrives (limits.forward_early_bytes)
// is still translated: it waits to be read whole.
TEST(ResponsesOnChatOnlyEngine, ALongRequestIsTranslatedToo) {
  proxy_fixture f(chat_only_engine());
  const std::string words(100 * 1024, 'a');
  auto r = respond(f, R"({"model":"llama","input":")" + words + R"("})", R"("tokens":2)");
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  EXPECT_EQ(json::parse(r.body).at("object"), "response");
  auto sent = sent_to_engine(f);
  EXPECT_EQ(sent.at("target"), "/v1/chat/completions");
  EXPECT_EQ(json::parse(sent.at("body").as_string()).at("messages").at(0).at("content").as_string(),
            words);
}

TEST(ResponsesOnChatOnlyEngine, AnOverrunIsCutAsIncomplete) {
  proxy_fixture f(chat_only_engine());
  http_client c(f.port());
  c.send(post_json("/v1/responses",
                   R"({"model":"llama","stream":true,"max_output_tokens":4,"input":"hi"})",
                   demo_knobs(R"("tokens":50,"ignore_limit":true)")));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  auto facts = responses_facts(r.body);
  EXPECT_EQ(facts.content_events, 4u);
  EXPECT_EQ(facts.finish_reason, "incomplete");
  EXPECT_EQ(facts.terminator, "event: response.incomplete");
  EXPECT_EQ(facts.output_tokens, 4);
  EXPECT_NE(r.body.find(R"({"reason":"max_output_tokens"})"), std::string::npos) << r.body;
  // The connection goes on.
  c.clear();
  c.send(post_json("/v1/responses", R"({"model":"llama","stream":true,"input":"hi"})",
                   demo_knobs(R"("tokens":2)")));
  EXPECT_TRUE(responses_facts(read_response(c).body).ended_properly());
}

TEST(ResponsesOnChatOnlyEngine, AFailureMidStreamEndsWithATerminalEvent) {
  proxy_fixture f(chat_only_engine());
  // The engine's error event, and a connection reset: either way response.failed.
  for (std::string fault : {R"("error_after":3)", R"("reset_after":3)"}) {
    SCOPED_TRACE(fault);
    auto r =
        respond(f, R"({"model":"llama","stream":true,"input":"hi"})", R"("tokens":10,)" + fault);
    ASSERT_TRUE(r.complete);
    auto facts = responses_facts(r.body);
    EXPECT_EQ(facts.content_events, 3u);
    EXPECT_TRUE(facts.error) << r.body;
    EXPECT_EQ(facts.terminator, "event: response.failed") << r.body;
  }
}

TEST(ResponsesOnChatOnlyEngine, TheEnginesErrorsPassAsTheyAre) {
  proxy_fixture f(chat_only_engine());
  auto r = respond(f, R"({"model":"llama","stream":true,"input":"hi"})", R"("status":429)");
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_EQ(json::parse(r.body).at("error").at("message"), "demo engine asked to fail with 429");
  r = respond(f, R"({"model":"llama","input":"hi"})", R"("status":503)");
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(json::parse(r.body).at("error").is_object()) << r.body;
}

TEST(ResponsesOnChatOnlyEngine, UsageReachesTheMetricsAndTheBudget) {
  proxy_fixture f(chat_only_engine());
  auto r = respond(f, R"({"model":"llama","stream":true,"input":"hi"})", R"("tokens":6)");
  auto facts = responses_facts(r.body);
  ASSERT_TRUE(facts.ended_properly()) << r.body;
  auto input = facts.input_tokens.value_or(0);
  EXPECT_TRUE(
      wait_until([&] { return llama_sample(f, "tokengate_tokens_total", ",type=\"output\"") == 6; },
                 2s, "the output tokens to be counted"));
  EXPECT_EQ(llama_sample(f, "tokengate_tokens_total", ",type=\"input\""), input);
  EXPECT_EQ(llama_sample(f, "tokengate_time_to_first_token_seconds_count"), 1);
  EXPECT_TRUE(wait_until(
      [&] {
        auto page = json::parse(http_get(f.admin_port(), "/budgets").body).as_object();
        for (const auto& b : page.at("budgets").as_array())
          if (b.at("name") == "team" && b.at("limit") == "tokens_per_minute")
            return b.at("used").to_number<double>() == double(input + 6);
        return false;
      },
      2s, "the budget to be charged the stream's usage"));
}

TEST(ResponsesOnChatOnlyEngine, AClientThatLeavesStopsTheEngine) {
  proxy_fixture f(chat_only_engine());
  http_client c(f.port());
  c.send(post_json("/v1/responses", R"({"model":"llama","stream":true,"input":"hi"})",
                   key_header + "x-demo: {\"tokens\":500,\"interval_ms\":20}\r\n"));
  ASSERT_TRUE(wait_until(
      [&] {
        c.read_some(20ms);
        return c.raw().find("response.output_text.delta") != std::string::npos;
      },
      2s, "the first token"));
  auto before = f.extra_engine_stats(1).cancelled.load();
  c.close();
  EXPECT_TRUE(wait_until([&] { return f.extra_engine_stats(1).cancelled.load() > before; }, 2s,
                         "the engine to see the close"));
}

TEST(ResponsesOnChatOnlyEngine, WhatItCannotTakeIsRefusedBeforeTheEngine) {
  proxy_fixture f(chat_only_engine());
  auto requests = [&] { return f.engine_stats_json(1).at("requests").to_number<int>(); };
  auto before = requests();
  http_client c(f.port());
  for (auto [path, body] : {std::pair{"/v1/completions", R"({"model":"llama","prompt":"hi"})"},
                            std::pair{"/v1/embeddings", R"({"model":"llama","input":"hi"})"}}) {
    c.send(post_json(path, body, key_header));
    auto r = read_response(c);
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_EQ(error_code_of(r), "unsupported_api") << path;
    EXPECT_NE(r.body.find("upstream 'llama' serves chat_completions only"), std::string::npos)
        << r.body;
    c.clear();
  }
  c.send(post_json("/v1/responses",
                   R"({"model":"llama","input":"hi","previous_response_id":"resp_1"})",
                   key_header));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_code_of(r), "unsupported_parameter");
  EXPECT_NE(r.body.find("previous_response_id"), std::string::npos) << r.body;
  EXPECT_EQ(requests(), before);
}

}  // namespace
}  // namespace tokengate::test::responses_translation
