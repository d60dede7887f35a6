// Traces over real sockets: a request's spans at a stand-in OTLP collector
// (ids, parents, attributes, the first token's time against the TTFT
// metric), the traceparent an engine receives, sampling, a collector that
// is down or refuses, and the spans sent on drain.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "support/fake_collector.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

namespace json = boost::json;

const std::string client_trace = "0af7651916cd43dd8448eb211c80319c";
const std::string client_span = "b7ad6b7169203331";

fixture_options traced(std::uint16_t collector_port, const std::string& more = "") {
  fixture_options o;
  o.top_extra =
      "routes:\n"
      "  - {name: chat, models: [demo], targets: [{upstream: demo}],\n"
      "     max_output_tokens: {default: 5, ceiling: 50, mode: clamp}}\n"
      "tracing:\n"
      "  endpoint: http://127.0.0.1:" +
      std::to_string(collector_port) +
      "/v1/traces\n"
      "  headers: {x-collector-key: sekret}\n"
      "  resource: {deployment.environment: test}\n"
      "  export_interval: 20ms\n" +
      more;
  return o;
}

std::string chat(int max_tokens = 5) {
  return R"({"model":"demo","stream":true,"max_tokens":)" + std::to_string(max_tokens) +
         R"(,"messages":[{"role":"user","content":"hi"}],"demo":{"ttft_ms":30,"interval_ms":5,"tokens":20}})";
}

// The value of a span's attribute, as JSON (stringValue, intValue, …).
json::value attr(const json::object& span, std::string_view key) {
  for (const auto& a : span.at("attributes").as_array())
    if (a.at("key").as_string() == key) {
      const auto& v = a.at("value").as_object();
      return v.begin()->value();
    }
  return nullptr;
}

std::uint64_t ns(const json::value& v) { return std::stoull(std::string(v.as_string())); }

const json::object* find_kind(const std::vector<json::object>& spans, int kind) {
  for (const auto& s : spans)
    if (s.at("kind").to_number<int>() == kind) return &s;
  return nullptr;
}

TEST(Tracing, ARequestsSpansArriveWithParentsAttributesAndTimings) {
  fake_collector collector;
  proxy_fixture f(traced(collector.port()));
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", chat(),
                   "traceparent: 00-" + client_trace + "-" + client_span +
                       "-01\r\n"
                       "tracestate: vendor=abc\r\n"));
  ASSERT_TRUE(read_response(c).complete);
  ASSERT_TRUE(wait_until([&] { return collector.spans().size() >= 2; }, 3s, "two spans"));
  auto spans = collector.spans();
  ASSERT_EQ(spans.size(), 2u);
  const auto* server = find_kind(spans, 2);
  const auto* client = find_kind(spans, 3);
  ASSERT_TRUE(server && client);
  // (The TTFT metric as this request left it, before the next one below.)
  const double metric_us = json::parse(http_get(f.admin_port(), "/stats").body)
                               .at("routes")
                               .at("chat")
                               .at("ttft_us")
                               .at("since_start")
                               .at("max")
                               .to_number<double>();
  // The client's trace goes on: its span is the server span's parent, the
  // server span the attempt's.
  EXPECT_EQ(server->at("traceId").as_string(), client_trace);
  EXPECT_EQ(server->at("parentSpanId").as_string(), client_span);
  EXPECT_EQ(client->at("traceId").as_string(), client_trace);
  EXPECT_EQ(client->at("parentSpanId"), server->at("spanId"));
  EXPECT_EQ(server->at("name"), "chat demo");
  // The engine got the attempt's span as its parent, and the tracestate.
  auto headers = f.engine_last_request().at("headers").as_object();
  EXPECT_EQ(headers.at("traceparent").as_string(),
            "00-" + client_trace + "-" + std::string(client->at("spanId").as_string()) + "-01");
  EXPECT_EQ(headers.at("tracestate"), "vendor=abc");
  // A traceparent that is not one starts a new trace: the client's
  // tracestate belonged to the old one, and does not go on.
  http_client c2(f.port());
  c2.send(post_json("/v1/chat/completions", chat(),
                    "traceparent: 00-not-a-trace-01\r\ntracestate: vendor=abc\r\n"));
  ASSERT_TRUE(read_response(c2).complete);
  auto restarted = f.engine_last_request().at("headers").as_object();
  EXPECT_FALSE(restarted.contains("tracestate"));
  EXPECT_EQ(std::string(restarted.at("traceparent").as_string()).find(client_trace),
            std::string::npos);

  EXPECT_EQ(attr(*server, "gen_ai.operation.name"), "chat");
  EXPECT_EQ(attr(*server, "gen_ai.provider.name"), "openai");
  EXPECT_EQ(attr(*server, "gen_ai.request.model"), "demo");
  EXPECT_EQ(attr(*server, "gen_ai.response.model"), "demo");
  EXPECT_EQ(attr(*server, "gen_ai.request.max_tokens"), "5");
  EXPECT_EQ(attr(*server, "gen_ai.usage.output_tokens"), "5");
  EXPECT_EQ(attr(*server, "gen_ai.response.finish_reasons").at("values").at(0).at("stringValue"),
            "length");
  EXPECT_EQ(attr(*server, "http.response.status_code"), "200");
  EXPECT_EQ(attr(*server, "tokengate.route"), "chat");
  EXPECT_EQ(attr(*server, "tokengate.limit_cut"), false);
  EXPECT_EQ(attr(*client, "tokengate.upstream"), "demo");
  EXPECT_EQ(attr(*client, "http.response.status_code"), "200");
  // No prompt, no completion.
  EXPECT_EQ(json::serialize(spans[0]).find("quick"), std::string::npos);
  EXPECT_EQ(json::serialize(spans[0]).find("\"hi\""), std::string::npos);
  // Resource and export headers.
  EXPECT_NE(json::serialize(server->at("resource")).find("deployment.environment"),
            std::string::npos);
  EXPECT_NE(collector.heads().front().find("x-collector-key: sekret"), std::string::npos);

  // The first token's event sits where the TTFT metric puts it (within 1 ms).
  const auto& event = server->at("events").at(0).as_object();
  EXPECT_EQ(event.at("name"), "gen_ai.first_token");
  double offset_us =
      static_cast<double>(ns(event.at("timeUnixNano")) - ns(server->at("startTimeUnixNano"))) / 1e3;
  EXPECT_NEAR(offset_us, metric_us, 1000.0);
  EXPECT_GT(metric_us, 25000.0);  // (the engine's 30 ms)
  // The attempt lasts as long as the stream, within the request's span.
  EXPECT_GE(ns(client->at("startTimeUnixNano")), ns(server->at("startTimeUnixNano")));
  EXPECT_LE(ns(client->at("endTimeUnixNano")), ns(server->at("endTimeUnixNano")));
  EXPECT_GT(ns(client->at("endTimeUnixNano")) - ns(client->at("startTimeUnixNano")), 40'000'000u);
  // (counted once the collector's answer is read, a moment after it has the spans)
  EXPECT_TRUE(wait_until([&] { return metric(f, "tokengate_trace_spans_exported_total") >= 2; }, 3s,
                         "the exported spans to be counted"));
}

TEST(Tracing, ALimitCutIsAnEventAndAnAttribute) {
  fake_collector collector;
  proxy_fixture f(traced(collector.port()));
  http_client c(f.port());
  c.send(post_json(
      "/v1/chat/completions",
      R"({"model":"demo","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}],
                       "demo":{"ttft_ms":0,"interval_ms":1,"tokens":20,"ignore_limit":true}})"));
  ASSERT_TRUE(read_response(c).complete);
  ASSERT_TRUE(wait_until([&] { return find_kind(collector.spans(), 2) != nullptr; }, 3s, "a span"));
  auto spans = collector.spans();
  const auto* server = find_kind(spans, 2);
  EXPECT_EQ(attr(*server, "tokengate.limit_cut"), true);
  bool cut_event = false;
  for (const auto& e : server->at("events").as_array())
    cut_event = cut_event || e.at("name") == "tokengate.limit_cut";
  EXPECT_TRUE(cut_event);
  // A new trace, started here: no parent.
  EXPECT_FALSE(server->contains("parentSpanId"));
}

// Each retry and each resume is an event on the request's span (and each
// attempt its own client span).
std::vector<json::object> server_events(fake_collector& collector, std::size_t nth) {
  std::vector<json::object> spans;
  auto servers = [&] {
    spans.clear();
    for (const auto& s : collector.spans())
      if (s.at("kind").to_number<int>() == 2) spans.push_back(s);
    return spans.size() > nth;
  };
  EXPECT_TRUE(wait_until(servers, 3s, "the request's span"));
  std::vector<json::object> events;
  if (spans.size() > nth)
    for (const auto& e : spans[nth].at("events").as_array())
      if (e.at("name") != "gen_ai.first_token") events.push_back(e.as_object());
  return events;
}

TEST(Tracing, RetriesAndResumesAreEvents) {
  fake_collector collector;
  auto o = traced(collector.port());
  o.top_extra.replace(o.top_extra.find("mode: clamp}}"), 13,
                      "mode: clamp}, retry_backoff: 1ms, resume: {mode: restart}}");
  proxy_fixture f(o);
  auto ask = [&](const std::string& fault) {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions",
                     R"({"model":"demo","stream":true,"max_tokens":30,)"
                     R"("messages":[{"role":"user","content":"hi"}],)"
                     R"("demo":{"ttft_ms":0,"interval_ms":1,"tokens":12,"fail_times":1,)" +
                         fault + "}}"));
    ASSERT_TRUE(read_response(c).complete);
  };
  ask(R"("status":500)");
  auto retried = server_events(collector, 0);
  ASSERT_EQ(retried.size(), 1u);
  EXPECT_EQ(retried[0].at("name"), "tokengate.retry");
  EXPECT_EQ(attr(retried[0], "http.response.status_code"), "500");

  ask(R"("reset_after":5)");
  auto resumed = server_events(collector, 1);
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0].at("name"), "tokengate.resume");
  EXPECT_EQ(attr(resumed[0], "tokengate.resume.reason"), "reset");
  EXPECT_EQ(attr(resumed[0], "tokengate.resume.mode"), "restart");
  EXPECT_EQ(attr(resumed[0], "tokengate.resume.at_token"), "5");
}

TEST(Tracing, AnUnsampledTraceIsPassedOnAndNotExported) {
  fake_collector collector;
  proxy_fixture f(traced(collector.port(), "  sampling_ratio: 0\n"));
  http_client c(f.port());
  // The client's "not sampled", and a trace started here at ratio 0.
  c.send(post_json("/v1/chat/completions", chat(),
                   "traceparent: 00-" + client_trace + "-" + client_span + "-00\r\n"));
  ASSERT_TRUE(read_response(c).complete);
  auto sent = std::string(f.engine_last_request().at("headers").at("traceparent").as_string());
  EXPECT_TRUE(sent.starts_with("00-" + client_trace + "-")) << sent;
  EXPECT_TRUE(sent.ends_with("-00")) << sent;
  EXPECT_EQ(sent.find(client_span), std::string::npos) << "the parent is tokengate's span";
  c.clear();
  c.send(post_json("/v1/chat/completions", chat()));
  ASSERT_TRUE(read_response(c).complete);
  sent = std::string(f.engine_last_request().at("headers").at("traceparent").as_string());
  EXPECT_EQ(sent.size(), 55u);
  EXPECT_TRUE(sent.ends_with("-00"));
  std::this_thread::sleep_for(100ms);  // (several export intervals)
  EXPECT_EQ(collector.requests(), 0u);
}

TEST(Tracing, ADeadCollectorCostsOnlyACounter) {
  std::uint16_t dead_port;
  {
    fake_collector gone;
    dead_port = gone.port();
  }
  proxy_fixture f(traced(dead_port, "  retries: 1\n"));
  for (int i = 0; i < 10; ++i) {
    http_client c(f.port());
    auto started = clock::now();
    c.send(post_json("/v1/chat/completions", chat()));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete);
    EXPECT_EQ(r.status, 200);
    EXPECT_LT(clock::now() - started, 1s);
  }
  EXPECT_TRUE(wait_until([&] { return metric(f, "tokengate_trace_export_failures_total") > 0; }, 3s,
                         "failed exports to be counted"));
  EXPECT_TRUE(wait_until([&] { return metric(f, "tokengate_trace_spans_dropped_total") > 0; }, 3s,
                         "the failed batches' spans to be counted as dropped"));
  EXPECT_EQ(metric(f, "tokengate_trace_spans_exported_total"), 0u);
}

TEST(Tracing, ADrainDoesNotWaitOnRetriesToADeadCollector) {
  std::uint16_t dead_port;
  {
    fake_collector gone;
    dead_port = gone.port();
  }
  // A batch of one span goes at once; its retries would last up to ten
  // export intervals (50 s) but for the drain.
  auto options = traced(dead_port, "  retries: 10\n  timeout: 300ms\n  batch_spans: 1\n");
  options.top_extra.replace(options.top_extra.find("  export_interval: 20ms\n"), 24,
                            "  export_interval: 5s\n");
  auto f = std::make_unique<proxy_fixture>(options);
  http_client c(f->port());
  c.send(post_json("/v1/chat/completions", chat()));
  ASSERT_TRUE(read_response(c).complete);
  c.close();
  ASSERT_TRUE(wait_until([&] { return metric(*f, "tokengate_trace_export_failures_total") > 0; },
                         3s, "a failed export"));
  // The batch is now in its backoff (10 tries would take over 100 s).
  auto started = clock::now();
  f.reset();  // drain and stop
  EXPECT_LT(clock::now() - started, 2s);
}

TEST(Tracing, ARefusingCollectorIsRetriedThenTakesTheBatch) {
  fake_collector collector;
  collector.answer_with(503);
  // A request's two spans make a batch at once; its retries may last ten
  // export intervals (5 s), well past the 100 ms the first one waits.
  auto options = traced(collector.port(), "  batch_spans: 2\n");
  options.top_extra.replace(options.top_extra.find("  export_interval: 20ms\n"), 24,
                            "  export_interval: 500ms\n");
  proxy_fixture f(options);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", chat()));
  ASSERT_TRUE(read_response(c).complete);
  ASSERT_TRUE(wait_until([&] { return collector.requests() >= 1; }, 3s, "an export try"));
  collector.answer_with(200);
  EXPECT_TRUE(wait_until([&] { return collector.spans().size() == 2; }, 3s,
                         "the batch, retried after the 503"));
  EXPECT_GE(metric(f, "tokengate_trace_export_failures_total"), 1u);
}

TEST(Tracing, SpansStillQueuedGoOutOnDrain) {
  fake_collector collector;
  {
    auto options = traced(collector.port());
    options.top_extra += "  export_interval: 1h\n";  // (only the drain sends)
    options.top_extra.replace(options.top_extra.find("  export_interval: 20ms\n"), 24, "");
    proxy_fixture f(options);
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions", chat()));
    ASSERT_TRUE(read_response(c).complete);
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(collector.requests(), 0u);
  }  // the server drains and stops here
  EXPECT_EQ(collector.spans().size(), 2u);
}

}  // namespace
}  // namespace tokengate::test
