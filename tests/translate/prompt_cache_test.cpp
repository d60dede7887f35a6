// prompt_cache: auto: where a chat request translated for Anthropic gets
// its cache breakpoints (tools, system, the user turn before the final
// one, the final one), only where the prefix reaches the minimum, never
// more than four, and none without the option.
#include "translate/prompt_cache.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "translate/request.hpp"

namespace tokengate {
namespace {

namespace json = boost::json;

json::object cached_request(std::string_view chat, std::optional<long long> min_tokens) {
  translate::request_options options;
  options.prompt_cache_min_tokens = min_tokens;
  auto out = translate::anthropic_request_from_chat(chat, options);
  if (auto* e = std::get_if<request_error>(&out)) ADD_FAILURE() << e->message;
  return json::parse(std::get<translate::translated_request>(out).body).as_object();
}

bool marked(const json::value& block) {
  const auto* o = block.if_object();
  return o && o->contains("cache_control") &&
         o->at("cache_control") == json::parse(R"({"type":"ephemeral"})");
}

// Where the breakpoints are: "tools[i]", "system[i]", "messages[i].content[j]".
std::vector<std::string> breakpoints_of(const json::object& m) {
  std::vector<std::string> out;
  auto scan = [&](const json::value* list, const std::string& name) {
    if (!list || !list->is_array()) return;
    for (std::size_t i = 0; i < list->get_array().size(); ++i)
      if (marked(list->get_array()[i])) out.push_back(name + "[" + std::to_string(i) + "]");
  };
  scan(m.if_contains("tools"), "tools");
  scan(m.if_contains("system"), "system");
  const auto& messages = m.at("messages").as_array();
  for (std::size_t i = 0; i < messages.size(); ++i)
    scan(messages[i].as_object().if_contains("content"),
         "messages[" + std::to_string(i) + "].content");
  return out;
}

const std::string tool =
    R"({"type":"function","function":{"name":"lookup","description":"Looks a word up.",)"
    R"("parameters":{"type":"object","properties":{"word":{"type":"string"}}}}})";

// A conversation: system, user, assistant (a tool call), its result, assistant, user.
const std::string conversation = R"({"model":"claude","tools":[)" + tool + R"(],"messages":[
      {"role":"system","content":"You are a careful assistant who answers briefly."},
      {"role":"user","content":"What does ephemeral mean?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"lookup","arguments":"{\"word\":\"ephemeral\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"lasting a very short time"},
      {"role":"assistant","content":"Lasting a very short time."},
      {"role":"user","content":"And transient?"}]})";

TEST(PromptCache, NothingWithoutTheOption) {
  auto m = cached_request(conversation, std::nullopt);
  EXPECT_TRUE(breakpoints_of(m).empty());
  EXPECT_TRUE(m.at("system").is_string());  // as the translation writes it
}

TEST(PromptCache, ToolsSystemAndTheLastTwoUserTurns) {
  auto m = cached_request(conversation, 1);
  // messages: [user, assistant (tool_use), user (tool_result), assistant, user]
  EXPECT_EQ(breakpoints_of(m),
            (std::vector<std::string>{"tools[0]", "system[0]", "messages[2].content[0]",
                                      "messages[4].content[0]"}));
  // The system prompt became one text block, its text unchanged.
  EXPECT_EQ(m.at("system").at(0).at("text"), "You are a careful assistant who answers briefly.");
  // The tool result is the user turn before the final one: the place the
  // request before this one marked last.
  EXPECT_EQ(m.at("messages").at(2).at("content").at(0).at("type"), "tool_result");
}

TEST(PromptCache, OnlyWherePrefixReachesTheMinimum) {
  // The tool's JSON alone is ~120 bytes, with the system prompt ~170, the
  // whole conversation ~600: estimated as bytes / 4.
  auto at = [&](long long min_tokens) {
    return breakpoints_of(cached_request(conversation, min_tokens));
  };
  EXPECT_EQ(at(35), (std::vector<std::string>{"system[0]", "messages[2].content[0]",
                                              "messages[4].content[0]"}));
  EXPECT_EQ(at(10'000), std::vector<std::string>{});
  // A system prompt too short for a breakpoint stays a string.
  EXPECT_TRUE(cached_request(conversation, 10'000).at("system").is_string());
  auto last_only = at(140);
  ASSERT_FALSE(last_only.empty());
  EXPECT_EQ(last_only.back(), "messages[4].content[0]");
  EXPECT_LT(last_only.size(), 3u);
}

TEST(PromptCache, AFirstTurnGetsItsOneUserBreakpoint) {
  auto m = cached_request(
      R"({"model":"claude","messages":[{"role":"system","content":"Be brief."},
          {"role":"user","content":[{"type":"text","text":"One."},{"type":"text","text":"Two."}]}]})",
      1);
  // The last block of the turn carries it: the prefix runs to the turn's end.
  EXPECT_EQ(breakpoints_of(m), (std::vector<std::string>{"system[0]", "messages[0].content[1]"}));
}

TEST(PromptCache, NeverMoreThanFour) {
  json::object request;
  request["tools"] = json::parse(R"([{"name":"a","input_schema":{}}])");
  request["system"] = "s";
  json::array messages;
  for (int i = 0; i < 10; ++i)
    messages.push_back(
        json::object{{"role", i % 2 ? "assistant" : "user"},
                     {"content", json::array{json::object{{"type", "text"}, {"text", "turn"}}}}});
  request["messages"] = std::move(messages);
  EXPECT_EQ(translate::place_cache_breakpoints(request, 1), 4u);
  EXPECT_EQ(breakpoints_of(request).size(), translate::max_cache_breakpoints);
  // (A prompt where each of the four places qualifies takes all four.)
  EXPECT_EQ(breakpoints_of(request).back(), "messages[8].content[0]");
}

TEST(PromptCache, AnAssistantPrefillIsNotMarked) {
  auto m = cached_request(
      R"({"model":"claude","messages":[{"role":"user","content":"Count."},
          {"role":"assistant","content":"One, two,"}]})",
      1);
  EXPECT_EQ(breakpoints_of(m), std::vector<std::string>{"messages[0].content[0]"});
}

}  // namespace
}  // namespace tokengate
