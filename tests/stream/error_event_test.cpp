#include "stream/error_event.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "stream/sse_parser.hpp"

namespace tokengate::stream {
namespace {

struct one_event final : sse_sink {
  void on_event(const sse_event& e) override {
    type = e.type;
    data = e.data;
    ++count;
  }
  std::string type, data;
  int count = 0;
};

one_event parse(const std::string& text) {
  sse_parser p;
  one_event e;
  p.feed(text, e);
  return e;
}

TEST(ErrorEvent, OpenAiShapeIsADataObjectWithAnErrorKey) {
  auto e = parse(make_error_event(dialect::openai_chat, "upstream_error", "upstream_disconnected",
                                  "cut \"off\""));
  ASSERT_EQ(e.count, 1);
  EXPECT_EQ(e.type, "message");
  auto v = boost::json::parse(e.data).as_object();
  EXPECT_EQ(v.at("error").at("message").as_string(), "cut \"off\"");
  EXPECT_EQ(v.at("error").at("code").as_string(), "upstream_disconnected");
}

TEST(ErrorEvent, AnthropicShapeIsAnErrorEvent) {
  auto e = parse(make_error_event(dialect::anthropic_messages, "api_error", "x", "gone"));
  ASSERT_EQ(e.count, 1);
  EXPECT_EQ(e.type, "error");
  auto v = boost::json::parse(e.data).as_object();
  EXPECT_EQ(v.at("type").as_string(), "error");
  EXPECT_EQ(v.at("error").at("type").as_string(), "api_error");
}

TEST(ErrorEvent, ResponsesShapeIsAnErrorEvent) {
  auto e = parse(
      make_error_event(dialect::openai_responses, "upstream_error", "upstream_timeout", "slow"));
  ASSERT_EQ(e.count, 1);
  EXPECT_EQ(e.type, "error");
  EXPECT_EQ(boost::json::parse(e.data).at("code").as_string(), "upstream_timeout");
}

}  // namespace
}  // namespace tokengate::stream
