// Chat answers translated for a Responses client. Every chat fixture
// stream, fed in pieces split anywhere, is translated and read back by
// tokengate's own Responses observer, which must find what the fixture's
// .expect.json says of the original: the text, the reasoning, the tool
// calls, the usage, the finish. The events are checked as the SDKs
// accumulate them (numbered from 0, each delta in an item opened before
// it), and the endings a relay asks for (a cut, a failure, an upstream
// that just stops) each end the response with a terminal event.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <map>

#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"
#include "support/fixtures.hpp"
#include "support/read_file.hpp"
#include "translate/responses_from_chat.hpp"
#include "translate/translation.hpp"

namespace tokengate {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

std::unique_ptr<translate::responses_from_chat> fixed_responses_translator() {
  return std::make_unique<translate::responses_from_chat>("client-model", 1796000000, "0123abcd");
}

// The chat body cut at `cuts` (offsets, ascending), translated event by
// event as the relay does, then ended.
std::string responses_of_chat(const std::string& body, const std::vector<std::size_t>& cuts) {
  auto translator = fixed_responses_translator();
  struct feed final : stream::sse_sink {
    translate::responses_from_chat* t;
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

std::vector<std::size_t> cuts_every(std::size_t n, std::size_t size) {
  std::vector<std::size_t> cuts;
  for (std::size_t at = n; at < size; at += n) cuts.push_back(at);
  return cuts;
}

// Arbitrary points (a fixed sequence, so a failure repeats).
std::vector<std::size_t> cuts_anywhere(std::size_t size, unsigned seed) {
  std::vector<std::size_t> cuts;
  for (std::size_t at = 0;;) {
    seed = seed * 1103515245u + 12345u;
    at += 1 + (seed >> 16) % 97;
    if (at >= size) return cuts;
    cuts.push_back(at);
  }
}

stream::stream_facts read_as_responses(const std::string& events) {
  stream::stream_observer observer(dialect::openai_responses, true);
  stream::sse_parser parser;
  parser.feed(events, observer);
  return observer.facts();
}

// The events as an SDK accumulates them: each named twice (event: and
// type), numbered 0, 1, 2…, response.created first, every item event on
// an item added before and not yet done, one terminal event, last.
testing::AssertionResult accumulates(const std::string& events) {
  struct check final : stream::sse_sink {
    std::vector<json::object> seen;
    std::string problem;
    void on_event(const stream::sse_event& e) override {
      auto v = json::parse(e.data);
      if (!v.is_object() || !v.at("type").is_string() || v.at("type").as_string() != e.type)
        problem = "event named twice differently";
      seen.push_back(v.as_object());
    }
  } c;
  stream::sse_parser parser;
  parser.feed(events, c);
  if (!c.problem.empty()) return testing::AssertionFailure() << c.problem;
  std::map<std::int64_t, std::pair<std::string, bool>> items;  // output_index → type, done
  for (std::size_t i = 0; i < c.seen.size(); ++i) {
    const auto& e = c.seen[i];
    std::string type(e.at("type").as_string());
    if (e.at("sequence_number") != static_cast<std::int64_t>(i))
      return testing::AssertionFailure()
             << "event " << i << " numbered " << e.at("sequence_number");
    if ((i == 0) != (type == "response.created"))
      return testing::AssertionFailure() << "event " << i << " is " << type;
    bool terminal =
        type == "response.completed" || type == "response.incomplete" || type == "response.failed";
    if (terminal != (i + 1 == c.seen.size()))
      return testing::AssertionFailure() << type << " at " << i << " of " << c.seen.size();
    if (!e.contains("output_index")) continue;
    auto index = e.at("output_index").to_number<std::int64_t>();
    if (type == "response.output_item.added") {
      if (items.contains(index) || index != static_cast<std::int64_t>(items.size()))
        return testing::AssertionFailure() << "item " << index << " added out of order";
      items[index] = {std::string(e.at("item").at("type").as_string()), false};
      continue;
    }
    auto item = items.find(index);
    if (item == items.end() || item->second.second)
      return testing::AssertionFailure() << type << " on item " << index << " not open";
    if (type == "response.output_item.done") item->second.second = true;
  }
  return testing::AssertionSuccess();
}

std::vector<fs::path> chat_fixtures() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(TOKENGATE_FIXTURES) / "sse"))
    if (e.path().extension() == ".sse" && test::fixture_dialect(e.path()) == dialect::openai_chat)
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

void expect_same_content(const stream::stream_facts& facts, const json::object& expect,
                         const std::string& translated) {
  const auto& text = expect.at("output_text");
  EXPECT_EQ(facts.text_by_choice.contains(0) ? facts.text_by_choice.at(0) : "",
            text.is_string() ? std::string(text.as_string()) : "");
  EXPECT_EQ(facts.reasoning_text, std::string(expect.at("reasoning_text").as_string()));
  const auto& calls = expect.at("tool_calls").as_array();
  ASSERT_EQ(facts.tool_calls.size(), calls.size()) << translated;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(facts.tool_calls[i].name, calls[i].at("name").as_string());
    EXPECT_EQ(facts.tool_calls[i].arguments, calls[i].at("arguments").as_string());
  }
  if (const auto& usage = expect.at("usage"); usage.is_object()) {
    if (!usage.at("output_tokens").is_null()) {
      EXPECT_EQ(facts.output_tokens, usage.at("output_tokens").to_number<std::int64_t>());
    }
    if (!usage.at("input_tokens").is_null()) {
      EXPECT_EQ(facts.input_tokens, usage.at("input_tokens").to_number<std::int64_t>());
    }
  }
}

TEST(ResponsesFromChat, FixturesSayWhatTheOriginalSaid) {
  int compared = 0;
  for (const auto& path : chat_fixtures()) {
    SCOPED_TRACE(path.filename().string());
    auto expect_path = path;
    auto expect =
        json::parse(test::read_file(expect_path.replace_extension(".expect.json"))).as_object();
    if (!expect.at("output_text_by_choice").is_null()) continue;  // n > 1: one answer only
    auto body = test::read_file(path);
    auto translated = responses_of_chat(body, {});
    EXPECT_TRUE(accumulates(translated)) << translated;
    auto facts = read_as_responses(translated);
    EXPECT_FALSE(facts.terminator.empty()) << "no terminal event:\n" << translated;
    // The same translation whatever the pieces the body arrived in.
    for (std::size_t n : {1, 7, 13})
      EXPECT_EQ(responses_of_chat(body, cuts_every(n, body.size())), translated) << n;
    for (unsigned seed : {1u, 2u, 3u})
      EXPECT_EQ(responses_of_chat(body, cuts_anywhere(body.size(), seed)), translated) << seed;
    ++compared;
    if (!expect.at("error").is_null() || !expect.at("ended_properly").as_bool()) {
      // An error, or an end without a finish: the response failed.
      EXPECT_TRUE(facts.error) << translated;
      EXPECT_EQ(facts.terminator, "event: response.failed");
      continue;
    }
    expect_same_content(facts, expect, translated);
    auto finish = std::string(expect.at("finish_reason").as_string());
    EXPECT_EQ(facts.finish_reason, finish == "length" ? "incomplete" : "completed");
    EXPECT_TRUE(facts.ended_properly()) << translated;
  }
  EXPECT_GE(compared, 10);
}

// Each upstream event is translated as it arrives: the client's events
// for a content event are written before the next upstream event is seen.
TEST(ResponsesFromChat, NoEventIsHeldBack) {
  for (const char* name :
       {"openai-chat-basic.sse", "openai-chat-tool-calls.sse", "openai-chat-reasoning.sse"}) {
    auto translator = translate::answer_translator_for(dialect::openai_responses,
                                                       dialect::openai_chat, false, "m");
    ASSERT_TRUE(translator);
    stream::stream_observer upstream_reading(dialect::openai_chat, true);
    struct each_event final : stream::sse_sink {
      stream::answer_translator* t;
      stream::stream_observer* o;
      int content = 0, at_once = 0;
      void on_event(const stream::sse_event& e) override {
        o->on_event(e);
        std::string out;
        t->on_event(e, out);
        if (o->last_kinds() & stream::content_kinds) {
          ++content;
          if (!out.empty()) ++at_once;
        }
      }
    } feed;
    feed.t = translator.get();
    feed.o = &upstream_reading;
    stream::sse_parser parser;
    parser.feed(test::read_file(fs::path(TOKENGATE_FIXTURES) / "sse" / name), feed);
    EXPECT_GT(feed.content, 3) << name;
    EXPECT_EQ(feed.at_once, feed.content) << name;
  }
}

std::string chat_chunk_event(std::string_view delta, std::string_view finish = "null") {
  return "data: {\"id\":\"c\",\"model\":\"llama\",\"choices\":[{\"index\":0,\"delta\":" +
         std::string(delta) + ",\"finish_reason\":" + std::string(finish) + "}]}\n\n";
}

TEST(ResponsesFromChat, TheTerminalEventCarriesTheWholeResponse) {
  auto t = fixed_responses_translator();
  std::string out;
  stream::sse_parser parser;
  struct feed final : stream::sse_sink {
    stream::answer_translator* t;
    std::string* out;
    void on_event(const stream::sse_event& e) override { t->on_event(e, *out); }
  } sink;
  sink.t = t.get();
  sink.out = &out;
  parser.feed(
      chat_chunk_event(R"({"role":"assistant","reasoning_content":"Think."})") +
          chat_chunk_event(R"({"content":"Hi"})") +
          chat_chunk_event(R"({"tool_calls":[{"index":0,"id":"call_1","type":"function",)"
                           R"("function":{"name":"get","arguments":"{\"a\""}}]})") +
          chat_chunk_event(R"({"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]})") +
          chat_chunk_event("{}", "\"tool_calls\"") +
          "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,"
          "\"prompt_tokens_details\":{\"cached_tokens\":4},"
          "\"completion_tokens_details\":{\"reasoning_tokens\":2}}}\n\ndata: [DONE]\n\n",
      sink);
  ASSERT_TRUE(accumulates(out)) << out;
  auto last = out.substr(out.rfind("data: ") + 6);
  auto response = json::parse(last).at("response").as_object();
  EXPECT_EQ(response.at("id"), "resp_0123abcd");
  EXPECT_EQ(response.at("object"), "response");
  EXPECT_EQ(response.at("status"), "completed");
  EXPECT_EQ(response.at("model"), "llama");
  EXPECT_EQ(response.at("created_at"), 1796000000);
  EXPECT_EQ(response.at("output"), json::parse(R"([
    {"id":"rs_0123abcd_0","type":"reasoning","summary":[{"type":"summary_text","text":"Think."}]},
    {"id":"msg_0123abcd_1","type":"message","status":"completed","content":[{"type":"output_text",
      "annotations":[],"logprobs":[],"text":"Hi"}],"role":"assistant"},
    {"id":"fc_0123abcd_2","type":"function_call","status":"completed","arguments":"{\"a\":1}",
      "call_id":"call_1","name":"get"}])"));
  EXPECT_EQ(response.at("usage"), json::parse(R"({"input_tokens":10,
    "input_tokens_details":{"cached_tokens":4},"output_tokens":5,
    "output_tokens_details":{"reasoning_tokens":2},"total_tokens":15})"));
  auto facts = read_as_responses(out);
  EXPECT_TRUE(facts.ended_properly());
  EXPECT_EQ(facts.reasoning_text, "Think.");
  ASSERT_EQ(facts.tool_calls.size(), 1u);
  EXPECT_EQ(facts.tool_calls[0].arguments, R"({"a":1})");
}

TEST(ResponsesFromChat, EveryEndingIsATerminalEvent) {
  auto feed_to = [](translate::responses_from_chat& t, const std::string& events) {
    struct sink final : stream::sse_sink {
      stream::answer_translator* t;
      std::string out;
      void on_event(const stream::sse_event& e) override { t->on_event(e, out); }
    } s;
    s.t = &t;
    stream::sse_parser parser;
    parser.feed(events, s);
    return s.out;
  };
  // Cut at the limit: incomplete, at max_output_tokens, the limit's tokens told.
  auto cut = fixed_responses_translator();
  auto out = feed_to(*cut, chat_chunk_event(R"({"content":"Hi"})"));
  cut->on_cut(1, out);
  auto facts = read_as_responses(out);
  EXPECT_TRUE(accumulates(out)) << out;
  EXPECT_TRUE(facts.ended_properly()) << out;
  EXPECT_EQ(facts.finish_reason, "incomplete");
  EXPECT_EQ(facts.output_tokens, 1);
  EXPECT_NE(out.find(R"("incomplete_details":{"reason":"max_output_tokens"})"), std::string::npos);
  EXPECT_NE(out.find(R"("status":"incomplete","content":[)"), std::string::npos);  // the message

  // A finish at the engine's own limit: the same.
  auto length = fixed_responses_translator();
  out =
      feed_to(*length, chat_chunk_event(R"({"content":"Hi"})", "\"length\"") + "data: [DONE]\n\n");
  EXPECT_EQ(read_as_responses(out).finish_reason, "incomplete");
  EXPECT_NE(out.find(R"({"reason":"max_output_tokens"})"), std::string::npos);

  // The relay's failure, before anything came: created, then failed.
  auto failed = fixed_responses_translator();
  out.clear();
  failed->on_failure(request_error::upstream(502, "upstream_disconnected", "upstream 'a' failed"),
                     out);
  EXPECT_TRUE(accumulates(out)) << out;
  facts = read_as_responses(out);
  EXPECT_TRUE(facts.error);
  EXPECT_EQ(facts.terminator, "event: response.failed");
  EXPECT_NE(out.find(R"("error":{"code":"upstream_disconnected","message":"upstream 'a' failed"})"),
            std::string::npos);
  std::string after;
  failed->on_end(after);  // (and nothing after the end)
  EXPECT_EQ(after, "");

  // The engine's error event mid-stream.
  auto errored = fixed_responses_translator();
  out = feed_to(*errored, chat_chunk_event(R"({"content":"Hi"})") +
                              R"(data: {"error":{"message":"engine died","type":"server_error",)"
                              R"("code":"engine_dead"}})"
                              "\n\ndata: [DONE]\n\n");
  EXPECT_TRUE(accumulates(out)) << out;
  EXPECT_TRUE(read_as_responses(out).error);
  EXPECT_NE(out.find(R"({"code":"engine_dead","message":"engine died"})"), std::string::npos);

  // An upstream that stops after its finish, without [DONE]: complete.
  auto stopped = fixed_responses_translator();
  out = feed_to(*stopped, chat_chunk_event(R"({"content":"Hi"})", "\"stop\""));
  stopped->on_end(out);
  EXPECT_TRUE(read_as_responses(out).ended_properly()) << out;
  // … or before it: failed.
  auto unfinished = fixed_responses_translator();
  out = feed_to(*unfinished, chat_chunk_event(R"({"content":"Hi"})"));
  unfinished->on_end(out);
  EXPECT_TRUE(accumulates(out)) << out;
  EXPECT_EQ(read_as_responses(out).terminator, "event: response.failed");
}

TEST(ResponsesFromChat, AWholeCompletionIsAResponse) {
  auto t = fixed_responses_translator();
  unsigned status = 200;
  std::string body = R"({"id":"c1","object":"chat.completion","model":"llama","choices":[{"index":0,
    "message":{"role":"assistant","content":"Hi.","reasoning_content":"Hm.","tool_calls":[
      {"id":"t1","type":"function","function":{"name":"get","arguments":"{\"a\":1}"}},
      {"id":"t2","type":"function","function":{"name":"put","arguments":"{}"}}]},
    "finish_reason":"length"}],
    "usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":90}}})";
  t->whole(status, body);
  EXPECT_EQ(status, 200u);
  auto r = json::parse(body).as_object();
  EXPECT_EQ(r.at("object"), "response");
  EXPECT_EQ(r.at("status"), "incomplete");
  EXPECT_EQ(r.at("incomplete_details"), json::parse(R"({"reason":"max_output_tokens"})"));
  EXPECT_EQ(r.at("model"), "llama");
  const auto& output = r.at("output").as_array();
  ASSERT_EQ(output.size(), 4u) << body;
  EXPECT_EQ(output[0].at("summary").at(0).at("text"), "Hm.");
  EXPECT_EQ(output[1].at("content").at(0).at("text"), "Hi.");
  EXPECT_EQ(output[2].at("call_id"), "t1");
  EXPECT_EQ(output[2].at("arguments"), R"({"a":1})");
  EXPECT_EQ(output[3].at("name"), "put");
  EXPECT_EQ(r.at("usage").at("input_tokens"), 100);
  EXPECT_EQ(r.at("usage").at("input_tokens_details").at("cached_tokens"), 90);
  EXPECT_EQ(r.at("usage").at("output_tokens"), 5);
  EXPECT_EQ(r.at("usage").at("total_tokens"), 105);

  // An empty answer is still a message; an error passes as it is (it is
  // OpenAI's shape already) unless it is not JSON; a 200 that is no
  // completion is not passed on.
  auto empty = fixed_responses_translator();
  body =
      R"({"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]})";
  empty->whole(status, body);
  EXPECT_EQ(json::parse(body).at("output").at(0).at("type"), "message");
  EXPECT_EQ(json::parse(body).at("status"), "completed");
  status = 429;
  body = R"({"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}})";
  auto before = body;
  fixed_responses_translator()->whole(status, body);
  EXPECT_EQ(status, 429u);
  EXPECT_EQ(body, before);
  body = "<html>Bad Gateway</html>";  // (an error that is not JSON is said in OpenAI's shape)
  fixed_responses_translator()->whole(status, body);
  EXPECT_EQ(status, 429u);
  EXPECT_EQ(json::parse(body).at("error").at("code"), "upstream_error");
  status = 200;
  body = "<html>";
  fixed_responses_translator()->whole(status, body);
  EXPECT_EQ(status, 502u);
  EXPECT_EQ(json::parse(body).at("error").at("code"), "upstream_invalid_answer");
}

}  // namespace
}  // namespace tokengate
