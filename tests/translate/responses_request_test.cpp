// Responses requests translated to chat completions: what each member
// becomes, what is dropped, and what is refused with a 400 naming it
// (the stateful members and the tools that run at OpenAI above all).
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "translate/request.hpp"

namespace tokengate {
namespace {

namespace json = boost::json;
using translate::request_options;

json::object chat_of_responses(std::string_view responses, request_options options = {}) {
  auto out = translate::chat_request_from_responses(responses, options);
  if (auto* e = std::get_if<request_error>(&out)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return json::parse(std::get<translate::translated_request>(out).body).as_object();
}

// The refusal's message ("(accepted)" when there is none), its status and code checked.
std::string responses_refusal(std::string_view body) {
  auto out = translate::chat_request_from_responses(body, {});
  auto* e = std::get_if<request_error>(&out);
  if (!e) return "(accepted)";
  EXPECT_EQ(e->status, 400u);
  EXPECT_TRUE(e->code == "unsupported_parameter" || e->code == "invalid_request" ||
              e->code == "invalid_json")
      << e->code;
  return e->message;
}

TEST(ResponsesToChat, AStringInputInstructionsAndOptions) {
  auto c = chat_of_responses(R"({"model":"llama","input":"hi","instructions":"Be brief.",
    "temperature":0.5,"top_p":0.9,"user":"u-1","stream":true,"max_output_tokens":100,
    "parallel_tool_calls":false,"reasoning":{"effort":"low","summary":"auto"},
    "store":false,"metadata":{"k":"v"},"include":["reasoning.encrypted_content"]})",
                             {64, config::limit_field::max_completion_tokens});
  EXPECT_EQ(c.at("model"), "llama");
  EXPECT_EQ(c.at("messages"), json::parse(R"([{"role":"system","content":"Be brief."},
    {"role":"user","content":"hi"}])"));
  EXPECT_EQ(c.at("temperature").as_double(), 0.5);
  EXPECT_EQ(c.at("top_p").as_double(), 0.9);
  EXPECT_EQ(c.at("user"), "u-1");
  EXPECT_EQ(c.at("stream"), true);
  EXPECT_EQ(c.at("stream_options"), json::parse(R"({"include_usage":true})"));
  EXPECT_EQ(c.at("max_completion_tokens"), 100);  // the upstream's spelling
  EXPECT_FALSE(c.contains("max_output_tokens"));
  EXPECT_EQ(c.at("parallel_tool_calls"), false);
  EXPECT_EQ(c.at("reasoning_effort"), "low");
  for (const char* dropped : {"store", "metadata", "include", "reasoning", "instructions"})
    EXPECT_FALSE(c.contains(dropped)) << dropped;
  // No limit asked: the route's, in the upstream's spelling; none at all: none.
  EXPECT_EQ(chat_of_responses(R"({"model":"m","input":"hi"})", {64, config::limit_field::keep})
                .at("max_tokens"),
            64);
  auto unlimited = chat_of_responses(R"({"model":"m","input":"hi","stream":false})");
  EXPECT_FALSE(unlimited.contains("max_tokens"));
  EXPECT_FALSE(unlimited.contains("stream_options"));
}

TEST(ResponsesToChat, InputItemsBecomeMessages) {
  auto c = chat_of_responses(R"({"model":"m","instructions":"Sys.","input":[
    {"role":"developer","content":"Be kind."},
    {"type":"message","role":"user","content":[{"type":"input_text","text":"look"},
      {"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"low"}]},
    {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"hm"}]},
    {"type":"message","role":"assistant","id":"msg_1","status":"completed",
      "content":[{"type":"output_text","text":"Calling ","annotations":[]},
                 {"type":"output_text","text":"two.","annotations":[]}]},
    {"type":"function_call","id":"fc_1","call_id":"c1","name":"get","arguments":"{\"a\":1}"},
    {"type":"function_call","id":"fc_2","call_id":"c2","name":"get","arguments":"{\"a\":2}"},
    {"type":"function_call_output","call_id":"c1","output":"41"},
    {"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"42"}]},
    {"role":"user","content":[{"type":"input_text","text":"and?"}]}]})");
  const auto& m = c.at("messages").as_array();
  ASSERT_EQ(m.size(), 7u) << json::serialize(m);
  EXPECT_EQ(m[0], json::parse(R"({"role":"system","content":"Sys."})"));
  EXPECT_EQ(m[1], json::parse(R"({"role":"system","content":"Be kind."})"));
  EXPECT_EQ(m[2], json::parse(R"({"role":"user","content":[{"type":"text","text":"look"},
    {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]})"));
  // The turn's text and its calls: one assistant message; the reasoning is not sent back.
  EXPECT_EQ(m[3], json::parse(R"({"role":"assistant","content":"Calling two.","tool_calls":[
    {"id":"c1","type":"function","function":{"name":"get","arguments":"{\"a\":1}"}},
    {"id":"c2","type":"function","function":{"name":"get","arguments":"{\"a\":2}"}}]})"));
  EXPECT_EQ(m[4], json::parse(R"({"role":"tool","tool_call_id":"c1","content":"41"})"));
  EXPECT_EQ(m[5], json::parse(R"({"role":"tool","tool_call_id":"c2","content":"42"})"));
  EXPECT_EQ(m[6], json::parse(R"({"role":"user","content":"and?"})"));
  // A call with no text before it: an assistant message of its own.
  auto calls = chat_of_responses(R"({"model":"m","input":[{"role":"user","content":"go"},
    {"type":"function_call","call_id":"c9","name":"f","arguments":"{}"}]})");
  EXPECT_EQ(calls.at("messages").at(1), json::parse(R"({"role":"assistant","content":null,
    "tool_calls":[{"id":"c9","type":"function","function":{"name":"f","arguments":"{}"}}]})"));
}

TEST(ResponsesToChat, ToolsToolChoiceAndFormats) {
  auto c = chat_of_responses(R"({"model":"m","input":"go","tool_choice":"required",
    "tools":[{"type":"function","name":"get","description":"d","strict":true,
      "parameters":{"type":"object","properties":{}}}],
    "text":{"format":{"type":"json_schema","name":"answer","strict":true,
      "schema":{"type":"object"}},"verbosity":"low"}})");
  EXPECT_EQ(c.at("tools"), json::parse(R"([{"type":"function","function":{"name":"get",
    "description":"d","parameters":{"type":"object","properties":{}},"strict":true}}])"));
  EXPECT_EQ(c.at("tool_choice"), "required");
  EXPECT_EQ(c.at("response_format"), json::parse(R"({"type":"json_schema","json_schema":{
    "name":"answer","schema":{"type":"object"},"strict":true}})"));
  EXPECT_EQ(chat_of_responses(R"({"model":"m","input":"go",
    "tool_choice":{"type":"function","name":"get"}})")
                .at("tool_choice"),
            json::parse(R"({"type":"function","function":{"name":"get"}})"));
  EXPECT_EQ(
      chat_of_responses(R"({"model":"m","input":"go","text":{"format":{"type":"json_object"}}})")
          .at("response_format"),
      json::parse(R"({"type":"json_object"})"));
  EXPECT_FALSE(chat_of_responses(R"({"model":"m","input":"go","text":{"format":{"type":"text"}}})")
                   .contains("response_format"));
}

TEST(ResponsesToChat, RefusesStateAndHostedToolsNamingThem) {
  auto refused_for = [](std::string_view members, std::string_view named) {
    auto message =
        responses_refusal("{\"model\":\"m\",\"input\":\"hi\"," + std::string(members) + "}");
    EXPECT_NE(message.find(named), std::string::npos) << members << " → " << message;
  };
  refused_for(R"("previous_response_id":"resp_1")", "'previous_response_id'");
  refused_for(R"("conversation":"conv_1")", "'conversation'");
  refused_for(R"("background":true)", "'background: true'");
  refused_for(R"("prompt":{"id":"pmpt_1"})", "'prompt'");
  refused_for(R"("truncation":"auto")", "'truncation: auto'");
  for (const char* hosted : {"web_search", "web_search_preview", "file_search", "code_interpreter",
                             "computer_use_preview", "mcp", "image_generation"})
    refused_for("\"tools\":[{\"type\":\"" + std::string(hosted) + "\"}]",
                "the tool type '" + std::string(hosted) + "'");
  refused_for(R"("tool_choice":{"type":"web_search_preview"})", "tool_choice of type");
  refused_for(R"("text":{"format":{"type":"grammar"}})", "text.format of type 'grammar'");
  refused_for(R"("max_tool_calls":3)", "'max_tool_calls'");
  refused_for(R"("frobnicate":1)", "'frobnicate'");
  // Stateless values of the same members pass.
  EXPECT_EQ(responses_refusal(R"({"model":"m","input":"hi","background":false,
    "truncation":"disabled","previous_response_id":null,"store":true})"),
            "(accepted)");
}

TEST(ResponsesToChat, RefusesInputItChatCannotSay) {
  EXPECT_NE(responses_refusal(R"({"model":"m","input":[{"type":"item_reference","id":"msg_1"}]})")
                .find("input[0] (an item_reference)"),
            std::string::npos);
  EXPECT_NE(responses_refusal(R"({"model":"m","input":[{"type":"web_search_call","id":"ws_1"}]})")
                .find("input[0] of type 'web_search_call'"),
            std::string::npos);
  EXPECT_NE(responses_refusal(R"({"model":"m","input":[{"role":"user","content":[
    {"type":"input_file","file_id":"file_1"}]}]})")
                .find("input[0] content part of type 'input_file'"),
            std::string::npos);
  EXPECT_NE(responses_refusal(R"({"model":"m","input":[{"role":"user","content":[
    {"type":"input_image","file_id":"file_1"}]}]})")
                .find("input_image without image_url"),
            std::string::npos);
  EXPECT_NE(responses_refusal(R"({"model":"m","input":[{"role":"critic","content":"x"}]})")
                .find("input[0] with role 'critic'"),
            std::string::npos);
  EXPECT_EQ(responses_refusal(R"({"model":"m"})"), "input is required");
  EXPECT_EQ(responses_refusal(R"({"model":"m","input":42})"), "input must be a string or an array");
  EXPECT_EQ(responses_refusal("[1]"), "request body is not a JSON object");
}

}  // namespace
}  // namespace tokengate
