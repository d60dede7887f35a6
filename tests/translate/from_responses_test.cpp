// Answers of a Responses-only upstream translated for chat and Anthropic
// clients, and Anthropic answers for a Responses client (each also
// checked against the two translations with chat in a row,
// tests/support/via_chat.hpp). The Responses streams are OpenAI's own
// fixture, every chat fixture turned into a Responses stream by
// responses_from_chat, and a few written here (reasoning, a call, the
// endings); each is fed in pieces split anywhere, translated, and read
// back by the client dialect's own observer, which must find what the
// original said: the text, the reasoning, the tool calls, the usage, the
// finish, or the error.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <functional>

#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"
#include "support/fixtures.hpp"
#include "support/read_file.hpp"
#include "support/via_chat.hpp"
#include "translate/anthropic_from_chat.hpp"
#include "translate/anthropic_from_responses.hpp"
#include "translate/chat_from_anthropic.hpp"
#include "translate/chat_from_responses.hpp"
#include "translate/responses_from_anthropic.hpp"
#include "translate/responses_from_chat.hpp"
#include "translate/translation.hpp"

namespace tokengate {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using make_translator = std::function<std::unique_ptr<stream::answer_translator>()>;

// The translator the proxy makes (translate::answer_translator_for), with
// its times and ids fixed, to compare two translations.
make_translator fixed_for(dialect client, dialect upstream, bool usage_asked = true) {
  return [=]() -> std::unique_ptr<stream::answer_translator> {
    EXPECT_TRUE(translate::answer_translator_for(client, upstream, usage_asked, "m"));
    if (client == dialect::openai_chat)
      return std::make_unique<translate::chat_from_responses>(usage_asked, 1796000000);
    if (client == dialect::anthropic_messages)
      return std::make_unique<translate::anthropic_from_responses>("client-model");
    return std::make_unique<translate::responses_from_anthropic>("client-model", 1796000000,
                                                                 "0123abcd");
  };
}

// The same through chat (two translations chained): they must say the same.
std::unique_ptr<stream::answer_translator> messages_through_chat() {
  return std::make_unique<test::via_chat>(
      std::make_unique<translate::chat_from_responses>(true, 1796000000),
      std::make_unique<translate::anthropic_from_chat>("client-model"));
}

std::unique_ptr<stream::answer_translator> responses_through_chat() {
  return std::make_unique<test::via_chat>(
      std::make_unique<translate::chat_from_anthropic>(true, 1796000000),
      std::make_unique<translate::responses_from_chat>("client-model", 1796000000, "0123abcd"));
}

// `body` cut at `cuts` (ascending offsets), translated event by event as
// the relay does, then ended.
std::string translated_in_pieces(const make_translator& make, const std::string& body,
                                 const std::vector<std::size_t>& cuts) {
  auto translator = make();
  struct feed final : stream::sse_sink {
    stream::answer_translator* t;
    std::string out;
    void on_event(const stream::sse_event& e) override { t->on_event(e, out); }
  } sink;
  sink.t = translator.get();
  stream::sse_parser parser;
  std::size_t at = 0;
  for (auto cut : cuts) {
    parser.feed(std::string_view(body).substr(at, cut - at), sink);
    at = cut;
  }
  parser.feed(std::string_view(body).substr(at), sink);
  translator->on_end(sink.out);
  return sink.out;
}

std::vector<std::size_t> every_n(std::size_t n, std::size_t size) {
  std::vector<std::size_t> cuts;
  for (std::size_t at = n; at < size; at += n) cuts.push_back(at);
  return cuts;
}

std::vector<std::size_t> seeded_cuts(std::size_t size, unsigned seed) {
  std::vector<std::size_t> cuts;
  for (std::size_t at = 0;;) {
    seed = seed * 1103515245u + 12345u;
    at += 1 + (seed >> 16) % 97;
    if (at >= size) return cuts;
    cuts.push_back(at);
  }
}

stream::stream_facts observed_as(dialect d, const std::string& events) {
  stream::stream_observer observer(d, true);
  stream::sse_parser parser;
  parser.feed(events, observer);
  return observer.facts();
}

// The translation of `body`, the same whatever pieces it came in.
std::string translated_anyhow(const make_translator& make, const std::string& body) {
  auto whole = translated_in_pieces(make, body, {});
  for (std::size_t n : {1, 7, 13})
    EXPECT_EQ(translated_in_pieces(make, body, every_n(n, body.size())), whole) << n;
  for (unsigned seed : {1u, 2u, 3u})
    EXPECT_EQ(translated_in_pieces(make, body, seeded_cuts(body.size(), seed)), whole) << seed;
  return whole;
}

// What a stream said, in terms every dialect has.
struct said {
  std::string text, reasoning;
  std::vector<stream::tool_call> calls;
  std::optional<std::int64_t> output_tokens;
  bool error = false;
};

said said_by(const stream::stream_facts& f) {
  return {f.text_by_choice.contains(0) ? f.text_by_choice.at(0) : "", f.reasoning_text,
          f.tool_calls, f.output_tokens, f.error};
}

void expect_same(const said& got, const said& want, const std::string& translated) {
  EXPECT_EQ(got.error, want.error) << translated;
  if (want.error) return;
  EXPECT_EQ(got.text, want.text) << translated;
  EXPECT_EQ(got.reasoning, want.reasoning) << translated;
  ASSERT_EQ(got.calls.size(), want.calls.size()) << translated;
  for (std::size_t i = 0; i < want.calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].name, want.calls[i].name);
    EXPECT_EQ(got.calls[i].arguments, want.calls[i].arguments);
  }
  if (want.output_tokens) {
    EXPECT_EQ(got.output_tokens, want.output_tokens) << translated;
  }
}

// A Responses stream as an engine would send it: reasoning, text, a call,
// the usage with cached and reasoning tokens.
std::string responses_event(std::string_view type, std::string_view rest) {
  static int sequence = 0;
  return "event: " + std::string(type) + "\ndata: {\"type\":\"" + std::string(type) +
         "\",\"sequence_number\":" + std::to_string(sequence++) + "," + std::string(rest) + "}\n\n";
}

std::string responses_opening() {
  return responses_event("response.created",
                         R"("response":{"id":"resp_1","object":"response","status":"in_progress",)"
                         R"("model":"gpt-5","output":[],"usage":null})") +
         responses_event("response.in_progress",
                         R"("response":{"id":"resp_1","object":"response","status":"in_progress",)"
                         R"("model":"gpt-5","output":[],"usage":null})");
}

std::string responses_usage(int output) {
  return R"("usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":80},)"
         R"("output_tokens":)" +
         std::to_string(output) +
         R"(,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":)" +
         std::to_string(100 + output) + "}";
}

std::string reasoning_text_call_stream() {
  return responses_opening() +
         responses_event(
             "response.output_item.added",
             R"("output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]})") +
         responses_event("response.reasoning_summary_part.added",
                         R"("item_id":"rs_1","output_index":0,"summary_index":0,)"
                         R"("part":{"type":"summary_text","text":""}})") +
         responses_event("response.reasoning_summary_text.delta",
                         R"("item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Think")") +
         responses_event("response.reasoning_summary_text.delta",
                         R"("item_id":"rs_1","output_index":0,"summary_index":0,"delta":"ing.")") +
         responses_event("response.output_item.done",
                         R"("output_index":0,"item":{"id":"rs_1","type":"reasoning"}})") +
         responses_event("response.output_item.added",
                         R"("output_index":1,"item":{"id":"msg_1","type":"message",)"
                         R"("status":"in_progress","content":[],"role":"assistant"})") +
         responses_event(
             "response.output_text.delta",
             R"x("item_id":"msg_1","output_index":1,"content_index":0,"delta":"Let ")x") +
         responses_event(
             "response.output_text.delta",
             R"("item_id":"msg_1","output_index":1,"content_index":0,"delta":"me \"see\".")") +
         responses_event(
             "response.output_item.added",
             R"("output_index":2,"item":{"id":"fc_1","type":"function_call",)"
             R"("status":"in_progress","arguments":"","call_id":"call_9","name":"get"})") +
         responses_event("response.function_call_arguments.delta",
                         R"("item_id":"fc_1","output_index":2,"delta":"{\"a\"")") +
         responses_event("response.function_call_arguments.delta",
                         R"("item_id":"fc_1","output_index":2,"delta":":1}")") +
         responses_event("response.function_call_arguments.done",
                         R"("item_id":"fc_1","output_index":2,"arguments":"{\"a\":1}")") +
         responses_event("response.completed",
                         R"("response":{"id":"resp_1","object":"response","status":"completed",)"
                         R"("model":"gpt-5","output":[],)" +
                             responses_usage(12) + "}");
}

std::vector<fs::path> fixtures_of(dialect d) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(TOKENGATE_FIXTURES) / "sse"))
    if (e.path().extension() == ".sse" && test::fixture_dialect(e.path()) == d)
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

json::object expectation_of(fs::path fixture) {
  return json::parse(test::read_file(fixture.replace_extension(".expect.json"))).as_object();
}

said said_by_expectation(const json::object& expect) {
  said s;
  const auto& text = expect.at("output_text");
  s.text = text.is_string() ? std::string(text.as_string()) : "";
  s.reasoning = expect.at("reasoning_text").as_string();
  for (const auto& c : expect.at("tool_calls").as_array())
    s.calls.push_back(
        {std::string(c.at("name").as_string()), std::string(c.at("arguments").as_string())});
  if (const auto& usage = expect.at("usage"); usage.is_object())
    if (!usage.at("output_tokens").is_null())
      s.output_tokens = usage.at("output_tokens").to_number<std::int64_t>();
  s.error = !expect.at("error").is_null() || !expect.at("ended_properly").as_bool();
  return s;
}

// Every Responses stream there is: OpenAI's fixture, every one-answer
// chat fixture as responses_from_chat says it, and the one above; with
// what each says.
std::vector<std::pair<std::string, said>> responses_streams() {
  std::vector<std::pair<std::string, said>> out;
  for (const auto& path : fixtures_of(dialect::openai_responses))
    out.emplace_back(test::read_file(path), said_by_expectation(expectation_of(path)));
  for (const auto& path : fixtures_of(dialect::openai_chat)) {
    auto expect = expectation_of(path);
    if (!expect.at("output_text_by_choice").is_null()) continue;  // n > 1: one answer only
    auto as_responses = translated_in_pieces(
        [] {
          return translate::answer_translator_for(dialect::openai_responses, dialect::openai_chat,
                                                  false, "m");
        },
        test::read_file(path), {});
    out.emplace_back(as_responses, said_by_expectation(expect));
  }
  out.emplace_back(reasoning_text_call_stream(),
                   said{"Let me \"see\".", "Thinking.", {{"get", R"({"a":1})"}}, 12, false});
  return out;
}

TEST(ChatFromResponses, EveryResponsesStreamSaysTheSameInChat) {
  int compared = 0;
  for (const auto& [body, want] : responses_streams()) {
    SCOPED_TRACE(body.substr(0, 200));
    auto chat = translated_anyhow(fixed_for(dialect::openai_chat, dialect::openai_responses), body);
    auto facts = observed_as(dialect::openai_chat, chat);
    expect_same(said_by(facts), want, chat);
    if (!want.error) {
      EXPECT_TRUE(facts.ended_properly()) << chat;
      EXPECT_EQ(facts.terminator, "data: [DONE]");
    }
    ++compared;
  }
  EXPECT_GE(compared, 10);
}

TEST(AnthropicFromResponses, EveryResponsesStreamSaysTheSameAsMessages) {
  for (const auto& [body, want] : responses_streams()) {
    SCOPED_TRACE(body.substr(0, 200));
    auto messages =
        translated_anyhow(fixed_for(dialect::anthropic_messages, dialect::openai_responses), body);
    auto facts = observed_as(dialect::anthropic_messages, messages);
    expect_same(said_by(facts), want, messages);
    auto chained = translated_anyhow(messages_through_chat, body);
    expect_same(said_by(observed_as(dialect::anthropic_messages, chained)), want, chained);
    if (!want.error) {
      EXPECT_TRUE(facts.ended_properly()) << messages;
    }
  }
}

TEST(ResponsesFromAnthropic, EveryAnthropicFixtureSaysTheSameAsResponses) {
  int compared = 0;
  for (const auto& path : fixtures_of(dialect::anthropic_messages)) {
    SCOPED_TRACE(path.filename().string());
    auto want = said_by_expectation(expectation_of(path));
    auto responses = translated_anyhow(
        fixed_for(dialect::openai_responses, dialect::anthropic_messages), test::read_file(path));
    auto facts = observed_as(dialect::openai_responses, responses);
    expect_same(said_by(facts), want, responses);
    auto chained = translated_anyhow(responses_through_chat, test::read_file(path));
    expect_same(said_by(observed_as(dialect::openai_responses, chained)), want, chained);
    if (want.error) {
      EXPECT_EQ(facts.terminator, "event: response.failed") << responses;
    } else {
      EXPECT_TRUE(facts.ended_properly()) << responses;
      EXPECT_EQ(facts.terminator, "event: response.completed");
    }
    ++compared;
  }
  EXPECT_GE(compared, 3);
}

// The usage a Responses stream ends with, in each client's words: cached
// and reasoning tokens included, and the finish a call makes.
TEST(ChatFromResponses, UsageAndFinishInTheClientsWords) {
  auto chat = translated_in_pieces(fixed_for(dialect::openai_chat, dialect::openai_responses),
                                   reasoning_text_call_stream(), {});
  EXPECT_NE(chat.find(R"("finish_reason":"tool_calls")"), std::string::npos) << chat;
  EXPECT_NE(chat.find(R"("usage":{"prompt_tokens":100,"completion_tokens":12,"total_tokens":112,)"
                      R"("prompt_tokens_details":{"cached_tokens":80},)"
                      R"("completion_tokens_details":{"reasoning_tokens":3}})"),
            std::string::npos)
      << chat;
  EXPECT_NE(chat.find(R"("id":"chatcmpl-resp_1")"), std::string::npos);
  EXPECT_NE(chat.find(R"("tool_calls":[{"index":0,"id":"call_9","type":"function")"),
            std::string::npos);
  // No usage asked: none sent (the accounting reads the upstream's own).
  auto quiet =
      translated_in_pieces(fixed_for(dialect::openai_chat, dialect::openai_responses, false),
                           reasoning_text_call_stream(), {});
  EXPECT_EQ(quiet.find("\"usage\""), std::string::npos) << quiet;

  auto messages =
      translated_in_pieces(fixed_for(dialect::anthropic_messages, dialect::openai_responses, false),
                           reasoning_text_call_stream(), {});
  EXPECT_NE(messages.find(R"("stop_reason":"tool_use")"), std::string::npos) << messages;
  EXPECT_NE(messages.find(R"("usage":{"input_tokens":20,"cache_read_input_tokens":80,)"
                          R"("output_tokens":12})"),
            std::string::npos)
      << messages;
  EXPECT_NE(messages.find(R"({"type":"thinking","thinking":"","signature":""})"),
            std::string::npos);
}

// An engine that streams no argument deltas: the call's arguments are
// told from its finished item, once.
TEST(ChatFromResponses, ArgumentsThatComeOnlyWhole) {
  auto body =
      responses_opening() +
      responses_event("response.output_item.added",
                      R"x("output_index":0,"item":{"id":"fc_1","type":"function_call",)x"
                      R"x("arguments":"","call_id":"call_1","name":"get"})x") +
      responses_event("response.output_item.done",
                      R"x("output_index":0,"item":{"id":"fc_1","type":"function_call",)x"
                      R"x("arguments":"{\"a\":1}","call_id":"call_1","name":"get"})x") +
      responses_event("response.completed", R"("response":{"id":"resp_1","object":"response",)"
                                            R"("status":"completed",)" +
                                                responses_usage(3) + "}");
  for (auto client : {dialect::openai_chat, dialect::anthropic_messages}) {
    auto out = translated_anyhow(fixed_for(client, dialect::openai_responses), body);
    auto facts = observed_as(client, out);
    ASSERT_EQ(facts.tool_calls.size(), 1u) << out;
    EXPECT_EQ(facts.tool_calls[0].arguments, R"({"a":1})") << out;
    EXPECT_TRUE(facts.ended_properly()) << out;
  }
}

TEST(ChatFromResponses, EveryEndingInTheClientsDialect) {
  auto incomplete =
      responses_opening() +
      responses_event("response.output_text.delta",
                      R"("item_id":"m","output_index":0,"delta":"Hi")") +
      responses_event("response.incomplete", R"("response":{"id":"resp_1","object":"response",)"
                                             R"("status":"incomplete","incomplete_details":)"
                                             R"({"reason":"max_output_tokens"},)" +
                                                 responses_usage(1) + "}");
  auto chat = translated_in_pieces(fixed_for(dialect::openai_chat, dialect::openai_responses),
                                   incomplete, {});
  EXPECT_EQ(observed_as(dialect::openai_chat, chat).finish_reason, "length") << chat;
  EXPECT_TRUE(observed_as(dialect::openai_chat, chat).ended_properly());
  auto messages = translated_in_pieces(
      fixed_for(dialect::anthropic_messages, dialect::openai_responses), incomplete, {});
  EXPECT_EQ(observed_as(dialect::anthropic_messages, messages).finish_reason, "max_tokens");

  auto failed =
      responses_opening() +
      responses_event("response.output_text.delta",
                      R"("item_id":"m","output_index":0,"delta":"Hi")") +
      responses_event("response.failed", R"("response":{"id":"resp_1","object":"response",)"
                                         R"("status":"failed","error":{"code":"server_error",)"
                                         R"("message":"the model broke"}})");
  chat =
      translated_in_pieces(fixed_for(dialect::openai_chat, dialect::openai_responses), failed, {});
  auto facts = observed_as(dialect::openai_chat, chat);
  EXPECT_TRUE(facts.error) << chat;
  EXPECT_NE(chat.find(R"({"error":{"message":"the model broke","type":"server_error",)"
                      R"("code":"server_error"}})"),
            std::string::npos)
      << chat;
  EXPECT_EQ(chat.find("[DONE]"), std::string::npos);
  messages = translated_in_pieces(fixed_for(dialect::anthropic_messages, dialect::openai_responses),
                                  failed, {});
  EXPECT_TRUE(observed_as(dialect::anthropic_messages, messages).error) << messages;
  EXPECT_NE(messages.find("event: error"), std::string::npos);

  auto error_event =
      responses_opening() + responses_event("error", R"("code":"rate_limit_exceeded",)"
                                                     R"("message":"slow down","param":null)");
  chat = translated_in_pieces(fixed_for(dialect::openai_chat, dialect::openai_responses),
                              error_event, {});
  EXPECT_NE(chat.find(R"("type":"requests","code":"rate_limit_exceeded")"), std::string::npos)
      << chat;

  // A stream that stops before its terminal event is not told as done.
  auto stopped = responses_opening() +
                 responses_event("response.output_text.delta", R"("item_id":"m","delta":"Hi")");
  chat =
      translated_in_pieces(fixed_for(dialect::openai_chat, dialect::openai_responses), stopped, {});
  EXPECT_TRUE(observed_as(dialect::openai_chat, chat).error) << chat;

  // The relay's cut at the limit: length, the limit's tokens told; its
  // failure: the client's error event, once.
  for (auto client : {dialect::openai_chat, dialect::anthropic_messages}) {
    auto t = fixed_for(client, dialect::openai_responses)();
    std::string out;
    stream::sse_parser parser;
    struct feed final : stream::sse_sink {
      stream::answer_translator* t;
      std::string* out;
      void on_event(const stream::sse_event& e) override { t->on_event(e, *out); }
    } sink;
    sink.t = t.get();
    sink.out = &out;
    parser.feed(responses_opening() +
                    responses_event("response.output_text.delta", R"("item_id":"m","delta":"Hi")"),
                sink);
    t->on_cut(1, out);
    auto cut = observed_as(client, out);
    EXPECT_TRUE(cut.ended_properly()) << out;
    EXPECT_EQ(cut.finish_reason, client == dialect::openai_chat ? "length" : "max_tokens");
    EXPECT_EQ(cut.output_tokens, 1);
    auto broken = fixed_for(client, dialect::openai_responses)();
    out.clear();
    broken->on_failure(request_error::upstream(502, "upstream_disconnected", "gone"), out);
    std::string more;
    broken->on_end(more);
    EXPECT_TRUE(observed_as(client, out).error) << out;
    EXPECT_EQ(more, "");
  }
}

TEST(ResponsesFromAnthropic, TheCutAndTheFailureAreTerminalEvents) {
  auto t = fixed_for(dialect::openai_responses, dialect::anthropic_messages)();
  std::string out;
  struct feed final : stream::sse_sink {
    stream::answer_translator* t;
    std::string* out;
    void on_event(const stream::sse_event& e) override { t->on_event(e, *out); }
  } sink;
  sink.t = t.get();
  sink.out = &out;
  stream::sse_parser parser;
  parser.feed(
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\","
      "\"model\":\"claude\",\"usage\":{\"input_tokens\":9,\"cache_read_input_tokens\":30,"
      "\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":"
      "\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}"
      "\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
      "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
      sink);
  t->on_cut(1, out);
  auto facts = observed_as(dialect::openai_responses, out);
  EXPECT_TRUE(facts.ended_properly()) << out;
  EXPECT_EQ(facts.finish_reason, "incomplete");
  EXPECT_EQ(facts.output_tokens, 1);
  EXPECT_NE(out.find(R"("input_tokens_details":{"cached_tokens":30})"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("incomplete_details":{"reason":"max_output_tokens"})"), std::string::npos);

  auto broken = fixed_for(dialect::openai_responses, dialect::anthropic_messages)();
  out.clear();
  broken->on_failure(request_error::upstream(502, "upstream_disconnected", "gone"), out);
  EXPECT_EQ(observed_as(dialect::openai_responses, out).terminator, "event: response.failed");
}

TEST(WholeAnswersFromResponses, AResponseObjectForChatAndAnthropicClients) {
  const std::string response = R"({"id":"resp_1","object":"response","status":"completed",
    "model":"gpt-5","output":[
      {"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Hm."}]},
      {"id":"msg_1","type":"message","status":"completed","role":"assistant",
       "content":[{"type":"output_text","text":"Hi.","annotations":[]}]},
      {"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"get",
       "arguments":"{\"a\":1}"}],
    "usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":90},"output_tokens":5,
      "output_tokens_details":{"reasoning_tokens":2},"total_tokens":105}})";
  unsigned status = 200;
  auto body = response;
  translate::chat_from_responses(false, 1796000000).whole(status, body);
  EXPECT_EQ(status, 200u);
  EXPECT_EQ(json::parse(body), json::parse(R"({"id":"chatcmpl-resp_1","object":"chat.completion",
    "created":1796000000,"model":"gpt-5","choices":[{"index":0,"message":{"role":"assistant",
    "content":"Hi.","reasoning_content":"Hm.","tool_calls":[{"id":"call_1","type":"function",
    "function":{"name":"get","arguments":"{\"a\":1}"}}]},"logprobs":null,
    "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":100,"completion_tokens":5,
    "total_tokens":105,"prompt_tokens_details":{"cached_tokens":90},
    "completion_tokens_details":{"reasoning_tokens":2}}})"));

  body = response;
  fixed_for(dialect::anthropic_messages, dialect::openai_responses)()->whole(status, body);
  auto m = json::parse(body).as_object();
  EXPECT_EQ(m.at("type"), "message");
  EXPECT_EQ(m.at("stop_reason"), "tool_use");
  EXPECT_EQ(m.at("content"), json::parse(R"([{"type":"thinking","thinking":"Hm.","signature":""},
    {"type":"text","text":"Hi."},{"type":"tool_use","id":"call_1","name":"get","input":{"a":1}}])"));
  EXPECT_EQ(m.at("usage"),
            json::parse(R"({"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":5})"));

  // Incomplete: length / max_tokens. Failed inside a 200: a 500. An error
  // answer: OpenAI's shape for chat, Anthropic's for Anthropic (a 429
  // stays a 429, a 503 is Anthropic's 529).
  body = R"({"id":"r","object":"response","status":"incomplete","incomplete_details":
    {"reason":"max_output_tokens"},"output":[{"type":"message","content":[
    {"type":"output_text","text":"Hi"}]}],"usage":{"input_tokens":1,"output_tokens":1}})";
  auto incomplete = body;
  translate::chat_from_responses(false).whole(status, body);
  EXPECT_EQ(json::parse(body).at("choices").at(0).at("finish_reason"), "length");
  body = incomplete;
  fixed_for(dialect::anthropic_messages, dialect::openai_responses)()->whole(status, body);
  EXPECT_EQ(json::parse(body).at("stop_reason"), "max_tokens");
  body = R"({"id":"r","object":"response","status":"failed","error":{"code":"server_error",
    "message":"broke"},"output":[]})";
  translate::chat_from_responses(false).whole(status, body);
  EXPECT_EQ(status, 500u);
  EXPECT_EQ(json::parse(body).at("error").at("message"), "broke");
  status = 503;
  body = R"({"error":{"message":"busy","type":"server_error","code":"overloaded"}})";
  fixed_for(dialect::anthropic_messages, dialect::openai_responses)()->whole(status, body);
  EXPECT_EQ(status, 529u);
  EXPECT_EQ(json::parse(body).at("error").at("type"), "overloaded_error");
  status = 200;
  body = "<html>";
  translate::chat_from_responses(false).whole(status, body);
  EXPECT_EQ(status, 502u);
  EXPECT_EQ(json::parse(body).at("error").at("code"), "upstream_invalid_answer");
}

TEST(WholeAnswersFromAnthropic, AMessageForAResponsesClient) {
  unsigned status = 200;
  std::string body = R"({"id":"msg_1","type":"message","role":"assistant","model":"claude",
    "content":[{"type":"thinking","thinking":"Hm.","signature":"s"},{"type":"text","text":"Hi."},
      {"type":"tool_use","id":"toolu_1","name":"get","input":{"a":1}}],
    "stop_reason":"tool_use","usage":{"input_tokens":10,"cache_read_input_tokens":90,
    "output_tokens":5}})";
  fixed_for(dialect::openai_responses, dialect::anthropic_messages)()->whole(status, body);
  EXPECT_EQ(status, 200u);
  auto r = json::parse(body).as_object();
  EXPECT_EQ(r.at("object"), "response");
  EXPECT_EQ(r.at("status"), "completed");
  EXPECT_EQ(r.at("model"), "claude");
  const auto& output = r.at("output").as_array();
  ASSERT_EQ(output.size(), 3u) << body;
  EXPECT_EQ(output[0].at("summary").at(0).at("text"), "Hm.");
  EXPECT_EQ(output[1].at("content").at(0).at("text"), "Hi.");
  EXPECT_EQ(output[2].at("call_id"), "toolu_1");
  EXPECT_EQ(output[2].at("arguments"), R"({"a":1})");
  EXPECT_EQ(r.at("usage").at("input_tokens"), 100);
  EXPECT_EQ(r.at("usage").at("input_tokens_details").at("cached_tokens"), 90);
  EXPECT_EQ(r.at("usage").at("output_tokens"), 5);

  status = 529;
  body = R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})";
  fixed_for(dialect::openai_responses, dialect::anthropic_messages)()->whole(status, body);
  EXPECT_EQ(status, 503u);
  EXPECT_EQ(json::parse(body).at("error").at("message"), "Overloaded");
}

}  // namespace
}  // namespace tokengate
