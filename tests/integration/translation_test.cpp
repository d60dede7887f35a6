// Translated exchanges over real sockets: kept-alive connections that
// carry translated streams one after another, the accounting of a
// translated stream, fallback between targets of different kinds, and
// what cannot be translated.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "stream/observer.hpp"
#include "support/hand_upstream.hpp"
#include "support/observed.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

namespace json = boost::json;

// The demo engine as an Anthropic-only upstream ("claude") and as an
// OpenAI-only one ("local"), each with a route.
fixture_options two_kinds() {
  fixture_options o;
  o.more_upstreams =
      "  as_anthropic: {base_url: \"http://127.0.0.1:{engine}/v1\", kind: anthropic}\n"
      "  as_openai: {base_url: \"http://127.0.0.1:{engine}/v1\", kind: openai}\n";
  o.top_extra =
      "routes:\n"
      "  - {name: claude, models: [claude], targets: [{upstream: as_anthropic}],\n"
      "     max_output_tokens: {default: 300, ceiling: 300, mode: clamp}}\n"
      "  - {name: local, models: [local], targets: [{upstream: as_openai}],\n"
      "     max_output_tokens: {default: 300, ceiling: 300, mode: clamp}}\n";
  return o;
}

std::string knobs(int tokens, const std::string& more = "") {
  return "x-demo: {\"ttft_ms\":0,\"interval_ms\":0,\"tokens\":" + std::to_string(tokens) + more +
         "}\r\n";
}

const std::string chat_body =
    R"({"model":"claude","stream":true,"messages":[{"role":"user","content":"hi"}]})";
const std::string messages_body =
    R"({"model":"local","max_tokens":300,"stream":true,"messages":[{"role":"user","content":"hi"}]})";

TEST(Translation, KeptAliveConnectionsCarryTranslatedStreamsWhole) {
  proxy_fixture f(two_kinds());
  for (auto [path, body] :
       {std::pair{"/v1/chat/completions", chat_body}, std::pair{"/v1/messages", messages_body}}) {
    SCOPED_TRACE(path);
    http_client c(f.port());
    // Short and long answers: one read each, and many.
    for (int tokens : {3, 250, 1, 120}) {
      c.send(post_json(path, body, knobs(tokens)));
      auto r = read_response(c);
      ASSERT_TRUE(r.complete);
      ASSERT_EQ(r.status, 200);
      auto facts = observed(r.body, dialect_for_path(path));
      EXPECT_TRUE(facts.ended_properly()) << r.body.substr(0, 400);
      EXPECT_EQ(facts.content_events, static_cast<std::size_t>(tokens));
      // Nothing follows the answer on the connection.
      c.read_some(50ms);
      auto end = c.raw().rfind("0\r\n\r\n");
      ASSERT_NE(end, std::string::npos);
      EXPECT_EQ(end + 5, c.raw().size()) << "bytes after the last chunk";
      c.clear();
    }
  }
}

TEST(Translation, AStreamIsAccountedFromTheUpstreamsEvents) {
  proxy_fixture f(two_kinds());
  http_client c(f.port());
  c.send(post_json("/v1/messages", messages_body, knobs(7)));
  ASSERT_TRUE(read_response(c).complete);
  std::string metrics;
  ASSERT_TRUE(wait_until(
      [&] {
        metrics = http_get(f.admin_port(), "/metrics").body;
        return metrics.find(
                   R"(tokengate_tokens_total{route="local",model="local",upstream="as_openai",type="output"} 7)") !=
               std::string::npos;
      },
      2s, "the translated stream's output tokens to be counted"));
}

TEST(Translation, AnOverrunIsCutAtTheLimitInTheClientsDialect) {
  proxy_fixture f(two_kinds());
  http_client c(f.port());
  c.send(post_json(
      "/v1/chat/completions",
      R"({"model":"claude","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]})",
      knobs(50, ",\"ignore_limit\":true")));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  auto facts = observed(r.body, dialect::openai_chat);
  EXPECT_EQ(facts.content_events, 4u);
  EXPECT_EQ(facts.finish_reason, "length");
  EXPECT_TRUE(facts.ended_properly());
  // The connection goes on.
  c.clear();
  c.send(post_json("/v1/chat/completions", chat_body, knobs(2)));
  EXPECT_TRUE(observed(read_response(c).body, dialect::openai_chat).ended_properly());
}

TEST(Translation, EachFallbackTargetGetsTheRequestInItsOwnAPI) {
  // The first target is down; the second speaks the client's API (no
  // translation) in one route, the other API (translated) in the other.
  fixture_options o;
  o.more_upstreams =
      "  dead_anthropic: {base_url: \"http://127.0.0.1:1/v1\", kind: anthropic}\n"
      "  dead_any: {base_url: \"http://127.0.0.1:1/v1\"}\n"
      "  as_anthropic: {base_url: \"http://127.0.0.1:{engine}/v1\", kind: anthropic}\n";
  o.top_extra =
      "routes:\n"
      "  - {name: to_native, models: [a], targets: [{upstream: dead_anthropic, weight: 1},\n"
      "     {upstream: demo, weight: 0}]}\n"
      "  - {name: to_translated, models: [b], targets: [{upstream: dead_any, weight: 1},\n"
      "     {upstream: as_anthropic, weight: 0}], max_output_tokens: {default: 50}}\n";
  proxy_fixture f(o);
  for (auto [model, target] :
       {std::pair{"a", "/v1/chat/completions"}, std::pair{"b", "/v1/messages"}}) {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions",
                     std::string(R"({"model":")") + model +
                         R"(","stream":true,"messages":[{"role":"user","content":"hi"}]})",
                     knobs(3)));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete);
    EXPECT_TRUE(observed(r.body, dialect::openai_chat).ended_properly()) << model << r.body;
    EXPECT_EQ(f.engine_last_request().at("target"), target) << model;
  }
}

// An event stream framed by a length (some servers buffer a short answer
// whole): the translation is another length, so the client's answer is
// chunked, never framed by the upstream's length.
TEST(Translation, AStreamFramedByItsLengthIsReframed) {
  const std::string events =
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\","
      "\"model\":\"c\",\"usage\":{\"input_tokens\":2,\"output_tokens\":0}}}\n\n"
      "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
      "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
      "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"
      "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
      "\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n"
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
  hand_upstream upstream([&](int listener) {
    int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      request.append(buf, static_cast<std::size_t>(n));
    }
    std::string answer = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: " +
                         std::to_string(events.size()) + "\r\n\r\n" + events;
    ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
    while (::recv(fd, buf, sizeof buf, 0) > 0) {
    }
    ::close(fd);
  });
  fixture_options o;
  o.more_upstreams = "  hand: {base_url: \"" + upstream.base_url() + "\", kind: anthropic}\n";
  o.top_extra = "routes:\n  - {name: hand, models: [claude], targets: [{upstream: hand}]}\n";
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", chat_body));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
  EXPECT_FALSE(r.headers.contains("content-length"));
  auto facts = observed(r.body, dialect::openai_chat);
  EXPECT_EQ(facts.text_by_choice[0], "Hello");
  EXPECT_TRUE(facts.ended_properly()) << r.body;
}

TEST(Translation, WhatCannotBeTranslatedIsRefusedBeforeAnyUpstream) {
  proxy_fixture f(two_kinds());
  auto before = f.engine_stats_json().at("requests").to_number<int>();
  http_client c(f.port());
  // (Responses reach Anthropic through chat; completions do not)
  c.send(post_json("/v1/completions", R"({"model":"claude","prompt":"hi"})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_code_of(r), "unsupported_api");
  c.clear();
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"claude","logit_bias":{},"audio":{},"messages":[]})"));
  r = read_response(c);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_code_of(r), "unsupported_parameter");
  EXPECT_NE(r.body.find("'audio'"), std::string::npos) << r.body;
  EXPECT_EQ(f.engine_stats_json().at("requests").to_number<int>(), before);
}

}  // namespace
}  // namespace tokengate::test
