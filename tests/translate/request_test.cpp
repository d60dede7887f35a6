// Requests translated both ways: what each member becomes, what is
// dropped as the providers' own compatibility layers drop it, and what is
// refused with a 400 naming it.
#include "translate/request.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace tokengate {
namespace {

namespace json = boost::json;
using translate::request_options;

json::object to_messages(std::string_view chat, request_options options = {}) {
  auto out = translate::anthropic_request_from_chat(chat, options);
  if (auto* e = std::get_if<request_error>(&out)) ADD_FAILURE() << e->message;
  return json::parse(std::get<translate::translated_request>(out).body).as_object();
}

json::object to_chat(std::string_view messages, request_options options = {}) {
  auto out = translate::chat_request_from_anthropic(messages, options);
  if (auto* e = std::get_if<request_error>(&out)) ADD_FAILURE() << e->message;
  return json::parse(std::get<translate::translated_request>(out).body).as_object();
}

std::string refusal(std::string_view body, bool from_chat) {
  auto out = from_chat ? translate::anthropic_request_from_chat(body, {})
                       : translate::chat_request_from_anthropic(body, {});
  auto* e = std::get_if<request_error>(&out);
  if (!e) return "(accepted)";
  EXPECT_EQ(e->status, 400u);
  return e->message;
}

TEST(ChatToMessages, SystemRolesContentAndLimits) {
  auto m = to_messages(R"({"model":"claude","stream":true,"temperature":1.5,"top_p":0.9,
    "stop":"END","user":"u-1","stream_options":{"include_usage":true},"seed":7,
    "messages":[{"role":"system","content":"Be brief."},{"role":"developer","content":"Be kind."},
      {"role":"user","content":[{"type":"text","text":"look"},
        {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
        {"type":"image_url","image_url":{"url":"https://x.test/cat.jpg"}}]}]})",
                       {512, config::limit_field::keep});
  EXPECT_EQ(m.at("model"), "claude");
  EXPECT_EQ(m.at("system"), "Be brief.\n\nBe kind.");
  EXPECT_EQ(m.at("max_tokens"), 512);  // the route's limit: Anthropic requires one
  EXPECT_EQ(m.at("temperature").as_double(), 1.0);
  EXPECT_EQ(m.at("top_p").as_double(), 0.9);
  EXPECT_EQ(m.at("stop_sequences"), json::array{"END"});
  EXPECT_EQ(m.at("metadata").at("user_id"), "u-1");
  EXPECT_FALSE(m.contains("seed"));  // dropped, as Anthropic's compatibility layer does
  EXPECT_FALSE(m.contains("stream_options"));
  const auto& content = m.at("messages").at(0).at("content").as_array();
  ASSERT_EQ(content.size(), 3u);
  EXPECT_EQ(content[1], json::parse(R"({"type":"image","source":{"type":"base64",
    "media_type":"image/png","data":"AAAA"}})"));
  EXPECT_EQ(content[2].at("source").at("url"), "https://x.test/cat.jpg");
  auto usage = translate::anthropic_request_from_chat(
      R"({"model":"m","stream_options":{"include_usage":true},"messages":[]})", {});
  EXPECT_TRUE(std::get<translate::translated_request>(usage).usage_asked);
  EXPECT_EQ(
      to_messages(R"({"model":"m","max_completion_tokens":9,"messages":[]})").at("max_tokens"), 9);
  EXPECT_EQ(to_messages(R"({"model":"m","messages":[]})").at("max_tokens"),
            translate::fallback_max_tokens);
}

TEST(ChatToMessages, ToolsCallsAndResults) {
  auto m = to_messages(R"({"model":"m","parallel_tool_calls":false,"tool_choice":"required",
    "tools":[{"type":"function","function":{"name":"get","description":"d","parameters":{"type":"object"}}}],
    "messages":[{"role":"user","content":"go"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"get","arguments":"{\"a\":1}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"42"},{"role":"user","content":"and?"}]})");
  EXPECT_EQ(m.at("tools"),
            json::parse(R"([{"name":"get","description":"d","input_schema":{"type":"object"}}])"));
  EXPECT_EQ(m.at("tool_choice"), json::parse(R"({"type":"any","disable_parallel_tool_use":true})"));
  const auto& turns = m.at("messages").as_array();
  ASSERT_EQ(turns.size(), 3u);
  EXPECT_EQ(turns[1].at("content").at(0),
            json::parse(R"({"type":"tool_use","id":"c1","name":"get","input":{"a":1}})"));
  // The tool's result and the user's next words: one user turn.
  EXPECT_EQ(turns[2].at("content"), json::parse(R"([{"type":"tool_result","tool_use_id":"c1",
    "content":[{"type":"text","text":"42"}]},{"type":"text","text":"and?"}])"));
  EXPECT_EQ(to_messages(R"({"model":"m","tool_choice":{"type":"function","function":{"name":"get"}},
    "messages":[]})")
                .at("tool_choice"),
            json::parse(R"({"type":"tool","name":"get"})"));
}

TEST(ChatToMessages, RefusesWhatHasNoCounterpart) {
  EXPECT_NE(refusal(R"({"model":"m","n":3,"messages":[]})", true).find("n other than 1"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","frobnicate":1,"messages":[]})", true).find("'frobnicate'"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","response_format":{"type":"json_object"},"messages":[]})", true)
                .find("response_format"),
            std::string::npos);
  EXPECT_NE(
      refusal(R"({"model":"m","messages":[{"role":"user","content":[{"type":"input_audio"}]}]})",
              true)
          .find("messages[0] part of type 'input_audio'"),
      std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c",
    "function":{"name":"f","arguments":"not json"}}]}]})",
                    true)
                .find("arguments must be a JSON object"),
            std::string::npos);
  EXPECT_EQ(refusal("[1,2]", true), "request body is not a JSON object");
}

TEST(MessagesToChat, SystemTurnsToolsAndLimits) {
  auto c = to_chat(R"({"model":"local","max_tokens":100,"stream":true,"top_k":5,
    "system":[{"type":"text","text":"Be brief."}],"stop_sequences":["END"],
    "metadata":{"user_id":"u-1"},"thinking":{"type":"enabled","budget_tokens":1024},
    "tools":[{"name":"get","description":"d","input_schema":{"type":"object"}}],
    "tool_choice":{"type":"any","disable_parallel_tool_use":true},
    "messages":[{"role":"user","content":[{"type":"text","text":"look"},
        {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
      {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},
        {"type":"text","text":"Calling."},{"type":"tool_use","id":"t1","name":"get","input":{"a":1}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"},
        {"type":"text","text":"and?"}]}]})",
                   {64, config::limit_field::max_completion_tokens});
  EXPECT_EQ(c.at("max_completion_tokens"), 100);  // the engine's spelling
  EXPECT_FALSE(c.contains("max_tokens"));
  EXPECT_EQ(c.at("stream_options"), json::parse(R"({"include_usage":true})"));
  EXPECT_EQ(c.at("stop"), json::array{"END"});
  EXPECT_EQ(c.at("user"), "u-1");
  EXPECT_FALSE(c.contains("top_k"));
  EXPECT_FALSE(c.contains("thinking"));
  EXPECT_EQ(c.at("tool_choice"), "required");
  EXPECT_EQ(c.at("parallel_tool_calls"), false);
  EXPECT_EQ(c.at("tools"), json::parse(R"([{"type":"function","function":{"name":"get",
    "description":"d","parameters":{"type":"object"}}}])"));
  const auto& m = c.at("messages").as_array();
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0], json::parse(R"({"role":"system","content":"Be brief."})"));
  EXPECT_EQ(m[1].at("content").at(1).at("image_url").at("url"), "data:image/png;base64,AAAA");
  EXPECT_EQ(m[2], json::parse(R"({"role":"assistant","content":"Calling.","tool_calls":[{"id":"t1",
    "type":"function","function":{"name":"get","arguments":"{\"a\":1}"}}]})"));
  EXPECT_EQ(m[3], json::parse(R"({"role":"tool","tool_call_id":"t1","content":"42"})"));
  EXPECT_EQ(m[4], json::parse(R"({"role":"user","content":[{"type":"text","text":"and?"}]})"));
  // No max_tokens (a client that skipped it): the route's limit.
  EXPECT_EQ(
      to_chat(R"({"model":"m","messages":[]})", {64, config::limit_field::keep}).at("max_tokens"),
      64);
}

TEST(MessagesToChat, RefusesWhatHasNoCounterpart) {
  EXPECT_NE(refusal(R"({"model":"m","tools":[{"type":"web_search_20250305","name":"web_search"}],
    "messages":[]})",
                    false)
                .find("server tool 'web_search_20250305'"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","messages":[{"role":"user","content":[{"type":"document",
    "source":{}}]}]})",
                    false)
                .find("type 'document'"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","mcp_servers":[],"messages":[]})", false).find("'mcp_servers'"),
            std::string::npos);
}

}  // namespace
}  // namespace tokengate
