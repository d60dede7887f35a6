// The dialect observer against every fixture's .expect.json, field by field.
#include "stream/observer.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/fixtures.hpp"
#include "support/read_file.hpp"

namespace tokengate::stream {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

using test::read_file;

std::string kinds_string(unsigned k) {
  if (k & kind_ignored) return "ignored";
  std::string out;
  const std::pair<unsigned, const char*> names[] = {
      {kind_text, "text"},     {kind_reasoning, "reasoning"}, {kind_tool_call, "tool_call"},
      {kind_finish, "finish"}, {kind_usage, "usage"},         {kind_error, "error"},
      {kind_done, "done"}};
  for (auto [bit, name] : names)
    if (k & bit) out += (out.empty() ? "" : "+") + std::string(name);
  return out.empty() ? "other" : out;
}

stream_facts observe(const std::string& body, dialect d, bool ndjson, std::size_t piece) {
  stream_observer observer(d, true);
  sse_parser parser;
  for (std::size_t i = 0; i < body.size(); i += piece) {
    auto part = std::string_view(body).substr(i, piece);
    if (ndjson)
      observer.feed_ndjson(part);
    else
      parser.feed(part, observer);
  }
  return observer.facts();
}

json::value optional_int(const std::optional<std::int64_t>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

void check_fixture(const fs::path& body_path, std::size_t piece) {
  auto expect_path = body_path;
  expect_path.replace_extension(".expect.json");
  auto expect = json::parse(read_file(expect_path)).as_object();
  bool ndjson = expect.at("framing").as_string() == "ndjson";
  auto facts = observe(read_file(body_path), test::fixture_dialect(body_path), ndjson, piece);

  std::vector<std::string> kinds;
  for (auto k : facts.kinds) kinds.push_back(kinds_string(k));
  std::vector<std::string> expected_kinds;
  for (const auto& k : expect.at("event_kinds").as_array())
    expected_kinds.emplace_back(k.as_string());
  EXPECT_EQ(kinds, expected_kinds);

  auto index_or_null = [](const std::optional<std::size_t>& v) {
    return v ? json::value(*v) : json::value(nullptr);
  };
  EXPECT_EQ(index_or_null(facts.first_content_event), expect.at("first_content_event_index"));
  EXPECT_EQ(index_or_null(facts.first_text_event), expect.at("first_text_event_index"));
  EXPECT_EQ(json::value(facts.content_events), expect.at("content_event_count"));
  const auto& counts = expect.at("content_event_counts").as_object();
  EXPECT_EQ(json::value(facts.text_events), counts.at("text"));
  EXPECT_EQ(json::value(facts.reasoning_events), counts.at("reasoning"));
  EXPECT_EQ(json::value(facts.tool_call_events), counts.at("tool_call"));

  if (expect.at("output_text").is_string()) {
    std::string text = facts.text_by_choice.count(0) ? facts.text_by_choice.at(0) : "";
    EXPECT_EQ(text, expect.at("output_text").as_string());
  } else {
    const auto& by_choice = expect.at("output_text_by_choice").as_object();
    EXPECT_EQ(facts.text_by_choice.size(), by_choice.size());
    for (const auto& [choice, text] : by_choice)
      EXPECT_EQ(facts.text_by_choice[std::stoll(std::string(choice))], text.as_string());
  }
  EXPECT_EQ(facts.reasoning_text, expect.at("reasoning_text").as_string());
  const auto& calls = expect.at("tool_calls").as_array();
  ASSERT_EQ(facts.tool_calls.size(), calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(facts.tool_calls[i].name, calls[i].at("name").as_string());
    EXPECT_EQ(facts.tool_calls[i].arguments, calls[i].at("arguments").as_string());
  }

  if (expect.at("usage").is_null()) {
    EXPECT_FALSE(facts.input_tokens || facts.output_tokens);
  } else {
    EXPECT_EQ(optional_int(facts.input_tokens), expect.at("usage").at("input_tokens"));
    EXPECT_EQ(optional_int(facts.output_tokens), expect.at("usage").at("output_tokens"));
  }
  EXPECT_EQ(json::value(facts.usage_events), expect.at("usage_event_count"));
  auto finish =
      facts.finish_reason.empty() ? json::value(nullptr) : json::value(facts.finish_reason);
  EXPECT_EQ(finish, expect.at("finish_reason"));
  auto terminator = facts.terminator.empty() ? json::value(nullptr) : json::value(facts.terminator);
  EXPECT_EQ(terminator, expect.at("terminator"));
  EXPECT_EQ(facts.error, !expect.at("error").is_null());
  if (facts.error) {
    EXPECT_EQ(json::parse(facts.error_json), expect.at("error"));
  }
  EXPECT_EQ(facts.ended_properly(), expect.at("ended_properly").as_bool());
}

TEST(StreamObserver, EveryFixtureWholeAndInSmallPieces) {
  int checked = 0;
  for (const auto& e : fs::directory_iterator(fs::path(TOKENGATE_FIXTURES) / "sse")) {
    auto ext = e.path().extension();
    if (ext != ".sse" && ext != ".ndjson") continue;
    for (std::size_t piece :
         {std::size_t(1 << 20), std::size_t(1), std::size_t(7), std::size_t(64)}) {
      SCOPED_TRACE(e.path().filename().string() + " in pieces of " + std::to_string(piece));
      check_fixture(e.path(), piece);
    }
    ++checked;
  }
  EXPECT_GE(checked, 23);
}

TEST(StreamObserver, DoneAfterErrorIsNotAProperEnd) {
  stream_observer o(dialect::openai_chat);
  sse_parser p;
  p.feed(
      "data: "
      "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\n",
      o);
  EXPECT_TRUE(o.facts().error);
  EXPECT_FALSE(o.facts().ended_properly());
}

// Found by tests/fuzz/sse_fuzz under UBSan: usage numbers beyond int64 (or
// fractional giants) are no token count, and reading them is not UB.
TEST(StreamObserver, AbsurdUsageNumbersAreIgnored) {
  stream_observer o(dialect::openai_chat);
  sse_parser p;
  p.feed(
      "data: "
      "{\"choices\":[],\"usage\":{\"prompt_tokens\":1.9e103,\"completion_tokens\":-1e300}}\n\n",
      o);
  EXPECT_FALSE(o.facts().input_tokens.has_value());
  EXPECT_FALSE(o.facts().output_tokens.has_value());
}

// Anthropic's input_tokens leaves out what its prompt cache read and
// wrote: the facts count the whole prompt, and keep both parts.
TEST(StreamObserver, AnthropicCacheTokensArePartOfTheInput) {
  stream_observer o(dialect::anthropic_messages);
  sse_parser p;
  p.feed(
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
      "{\"input_tokens\":3,\"cache_creation_input_tokens\":40,\"cache_read_input_tokens\":"
      "500,\"output_tokens\":1}}}\n\n",
      o);
  EXPECT_EQ(o.facts().input_tokens, 543);
  EXPECT_EQ(o.facts().cache_read_tokens, 500);
  EXPECT_EQ(o.facts().cache_write_tokens, 40);
  // A message_delta that repeats input_tokens alone keeps the cache's parts.
  p.feed(
      "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
      "\"end_turn\"},\"usage\":{\"input_tokens\":3,\"output_tokens\":9}}\n\n",
      o);
  EXPECT_EQ(o.facts().input_tokens, 543);
  EXPECT_EQ(o.facts().output_tokens, 9);
}

}  // namespace
}  // namespace tokengate::stream
