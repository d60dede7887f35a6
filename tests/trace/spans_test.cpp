// A request's spans (trace/request_spans) and their OTLP/HTTP JSON
// (trace/otlp_json): the server span continues the client's trace, each
// upstream attempt is a client span under it, a retry is an event naming
// where it went next, a 5xx is an error and a client's 4xx is not; the
// JSON carries ids in hex, times and 64-bit integers as strings.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "config/config.hpp"
#include "http/request_context.hpp"
#include "trace/otlp_json.hpp"
#include "trace/request_spans.hpp"

namespace tokengate::trace {
namespace {

using namespace std::chrono_literals;

// A chat request of `model` that took two attempts: e1 answered 503, e2 200.
request_context retried_request() {
  request_context ctx;
  ctx.request_id = "req-1";
  ctx.method = "POST";
  ctx.path = "/v1/chat/completions";
  ctx.dialect = dialect::openai_chat;
  ctx.model = "demo";
  ctx.route = "chat";
  ctx.upstream = "e2";
  ctx.status = 200;
  ctx.attempts = 2;
  ctx.trace = begin_trace("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", 1.0);
  const auto t0 = clock::now();
  ctx.received = t0;
  ctx.request_read = t0 + 1ms;
  ctx.first_token_written = t0 + 40ms;
  ctx.finished = t0 + 90ms;
  attempt_span failed{new_span_id(), "e1",      "10.0.0.1", "demo",
                      t0 + 2ms,      t0 + 10ms, 503,        "upstream_unavailable"};
  attempt_span answered{new_span_id(), "e2", "10.0.0.2", "demo", t0 + 11ms, t0 + 90ms, 200};
  ctx.attempt_spans = {failed, answered};
  ctx.output_tokens = 8;
  return ctx;
}

const attribute* find(const std::vector<attribute>& list, std::string_view key) {
  for (const auto& a : list)
    if (a.key == key) return &a;
  return nullptr;
}

TEST(RequestSpans, AServerSpanWithAClientSpanPerAttempt) {
  config::config cfg;
  auto ctx = retried_request();
  auto spans = spans_for(ctx, cfg);
  ASSERT_EQ(spans.size(), 3u);
  const auto& server = spans[0];
  EXPECT_EQ(server.kind, span_kind::server);
  EXPECT_EQ(to_hex(server.trace), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(to_hex(server.parent), "00f067aa0ba902b7");
  EXPECT_EQ(server.name, "chat demo");
  EXPECT_EQ(server.status, span_status::unset);
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(spans[i].kind, span_kind::client);
    EXPECT_EQ(spans[i].parent, server.id);
    EXPECT_EQ(spans[i].trace, server.trace);
  }
  EXPECT_LT(spans[1].end_ns, spans[2].start_ns + 1);
  // The retry is an event naming the failed attempt and the next target.
  bool retried = false;
  for (const auto& e : server.events)
    if (e.name == "tokengate.retry") {
      retried = true;
      ASSERT_TRUE(find(e.attributes, "tokengate.next_upstream"));
      EXPECT_EQ(std::get<std::string>(find(e.attributes, "tokengate.next_upstream")->value), "e2");
      EXPECT_EQ(std::get<std::int64_t>(find(e.attributes, "http.response.status_code")->value),
                503);
    }
  EXPECT_TRUE(retried);
  ASSERT_TRUE(find(server.attributes, "gen_ai.usage.output_tokens"));
  EXPECT_EQ(std::get<std::int64_t>(find(server.attributes, "gen_ai.usage.output_tokens")->value),
            8);
}

TEST(RequestSpans, AnUpstreamFailureIsAnErrorAndAClientMistakeIsNot) {
  config::config cfg;
  auto failed = retried_request();
  failed.status = 502;
  failed.error = request_error::upstream(502, "upstream_failed", "both targets failed");
  auto spans = spans_for(failed, cfg);
  EXPECT_EQ(spans[0].status, span_status::error);
  EXPECT_EQ(spans[0].status_message, "both targets failed");
  auto refused = retried_request();
  refused.status = 400;
  refused.error = request_error::client(400, "invalid_json", "the body is not JSON");
  EXPECT_EQ(spans_for(refused, cfg)[0].status, span_status::unset);
}

TEST(OtlpJson, IdsInHexTimesAndIntegersAsStrings) {
  span s;
  s.trace = begin_trace("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", 1.0).trace;
  s.id = new_span_id();
  s.name = "chat demo";
  s.start_ns = 1'796'000'000'000'000'000ULL;
  s.end_ns = s.start_ns + 5;
  s.attributes = {{"tokengate.attempts", std::int64_t{2}},
                  {"tokengate.streamed", true},
                  {"gen_ai.response.finish_reasons", std::vector<std::string>{"stop"}}};
  s.status = span_status::error;
  s.status_message = "failed";
  auto doc = boost::json::parse(otlp_json({{"service.name", "tokengate"}}, {s}));
  const auto& rs = doc.at("resourceSpans").at(0);
  EXPECT_EQ(rs.at("resource").at("attributes").at(0).at("value").at("stringValue"), "tokengate");
  const auto& out = rs.at("scopeSpans").at(0).at("spans").at(0);
  EXPECT_EQ(out.at("traceId"), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(out.at("spanId").as_string().size(), 16u);
  EXPECT_FALSE(out.as_object().contains("parentSpanId"));  // (a root span)
  EXPECT_EQ(out.at("startTimeUnixNano"), "1796000000000000000");
  EXPECT_EQ(out.at("kind"), 2);
  const auto& attrs = out.at("attributes");
  EXPECT_EQ(attrs.at(0).at("value").at("intValue"), "2");
  EXPECT_EQ(attrs.at(1).at("value").at("boolValue"), true);
  EXPECT_EQ(attrs.at(2).at("value").at("arrayValue").at("values").at(0).at("stringValue"), "stop");
  EXPECT_EQ(out.at("status").at("code"), 2);
  EXPECT_EQ(out.at("status").at("message"), "failed");
}

}  // namespace
}  // namespace tokengate::trace
