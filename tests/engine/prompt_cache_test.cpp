// The demo engine's imitation of Anthropic's prompt caching: a breakpoint
// writes its prefix once it is long enough, a later prompt that begins
// with it reads it (found at a breakpoint or the blocks shortly before
// one), entries live for their TTL from their last use, markers do not
// change what a prefix is, and more than four breakpoints is a 400.
#include "engine/prompt_cache.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace tokengate::engine {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

// A text block of `words` four-byte words (one token each, as the engine counts).
json::object block(std::string_view word, int words, bool marked = false) {
  std::string text;
  for (int i = 0; i < words; ++i) text += std::string(word).substr(0, 4);
  json::object b{{"type", "text"}, {"text", text}};
  if (marked) b["cache_control"] = json::object{{"type", "ephemeral"}};
  return b;
}

json::object message(std::string_view role, json::object content) {
  return {{"role", role}, {"content", json::array{std::move(content)}}};
}

prompt_cache_usage use(prompt_cache& cache, const json::object& request,
                       prompt_cache::clock::time_point now) {
  auto out = cache.use(request, now);
  if (auto* e = std::get_if<std::string>(&out)) ADD_FAILURE() << *e;
  return std::get<prompt_cache_usage>(out);
}

const auto t0 = prompt_cache::clock::time_point{} + 1h;

TEST(DemoPromptCache, WritesThenReadsAConversationAsItGrows) {
  prompt_cache cache(100, 5min);
  json::object turn1{{"system", json::array{block("sys ", 200, true)}},
                     {"messages", json::array{message("user", block("ask1", 50, true))}}};
  auto first = use(cache, turn1, t0);
  EXPECT_TRUE(first.marked);
  EXPECT_EQ(first.read, 0u);
  EXPECT_EQ(first.written, 250u);  // up to the last breakpoint
  EXPECT_EQ(first.total, 251u);
  EXPECT_EQ(first.uncached(), 1u);

  // The next turn: the earlier user turn loses its marker, the new one has it.
  json::object turn2{{"system", json::array{block("sys ", 200, true)}},
                     {"messages", json::array{message("user", block("ask1", 50)),
                                              message("assistant", block("ans1", 30)),
                                              message("user", block("ask2", 20, true))}}};
  auto second = use(cache, turn2, t0 + 1min);
  EXPECT_EQ(second.read, 250u);  // found two blocks before the breakpoint
  EXPECT_EQ(second.written, 50u);
  EXPECT_EQ(second.uncached(), 1u);

  // The same again: all read.
  auto again = use(cache, turn2, t0 + 2min);
  EXPECT_EQ(again.read, 300u);
  EXPECT_EQ(again.written, 0u);
}

TEST(DemoPromptCache, ShortPrefixesAreNotCached) {
  prompt_cache cache(1024, 5min);
  json::object r{{"system", json::array{block("sys ", 100, true)}},
                 {"messages", json::array{message("user", block("ask ", 10))}}};
  EXPECT_EQ(use(cache, r, t0).written, 0u);
  EXPECT_EQ(use(cache, r, t0).read, 0u);
  EXPECT_TRUE(use(cache, r, t0).marked);
}

TEST(DemoPromptCache, EntriesExpireUnlessRead) {
  prompt_cache cache(10, 5min);
  json::object r{{"system", json::array{block("sys ", 100, true)}},
                 {"messages", json::array{message("user", block("ask ", 10))}}};
  EXPECT_EQ(use(cache, r, t0).written, 100u);
  EXPECT_EQ(use(cache, r, t0 + 4min).read, 100u);  // a read refreshes it…
  EXPECT_EQ(use(cache, r, t0 + 8min).read, 100u);
  auto late = use(cache, r, t0 + 14min);  // … and unread for longer than the TTL it is gone
  EXPECT_EQ(late.read, 0u);
  EXPECT_EQ(late.written, 100u);
}

TEST(DemoPromptCache, ToolsComeFirstAndADifferentPrefixMisses) {
  prompt_cache cache(10, 5min);
  json::object tool{{"name", "lookup"},
                    {"input_schema", json::object{{"type", "object"}}},
                    {"cache_control", json::object{{"type", "ephemeral"}}}};
  json::object r{{"tools", json::array{tool}},
                 {"messages", json::array{message("user", block("ask ", 100, true))}}};
  auto first = use(cache, r, t0);
  EXPECT_GT(first.written, 100u);  // the tool's JSON counts too
  // Another tool: nothing of the prefix matches any more.
  r["tools"].as_array()[0].as_object()["name"] = "search";
  auto other = use(cache, r, t0);
  EXPECT_EQ(other.read, 0u);
  // A string content reads as the text block it means: the same prefix.
  json::object blocks{{"messages", json::array{message("user", block("xxxx", 100, true))}}};
  EXPECT_EQ(use(cache, blocks, t0).written, 100u);
  json::object plain{
      {"messages", json::array{json::object{{"role", "user"}, {"content", std::string(400, 'x')}},
                               message("assistant", block("ok  ", 1)),
                               message("user", block("more", 1, true))}}};
  EXPECT_EQ(use(cache, plain, t0).read, 100u);
}

TEST(DemoPromptCache, MoreThanFourBreakpointsIsRefused) {
  prompt_cache cache(1, 5min);
  json::array content;
  for (int i = 0; i < 5; ++i) content.push_back(block("word", 1, true));
  json::object r{{"messages", json::array{json::object{{"role", "user"}, {"content", content}}}}};
  auto out = cache.use(r, t0);
  ASSERT_TRUE(std::holds_alternative<std::string>(out));
  EXPECT_EQ(std::get<std::string>(out),
            "A maximum of 4 blocks with cache_control may be provided. Found 5.");
  r["messages"].as_array()[0].as_object()["content"].as_array().pop_back();
  EXPECT_TRUE(std::holds_alternative<prompt_cache_usage>(cache.use(r, t0)));
  // A marker that is not ephemeral is refused as Anthropic refuses it.
  json::object odd{{"messages", json::array{message("user", block("word", 1))}}};
  odd["messages"].as_array()[0].as_object()["content"].as_array()[0].as_object()["cache_control"] =
      json::object{{"type", "persistent"}};
  EXPECT_TRUE(std::holds_alternative<std::string>(cache.use(odd, t0)));
}

}  // namespace
}  // namespace tokengate::engine
