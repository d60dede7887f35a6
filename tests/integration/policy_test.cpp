// The YAML policy through the real proxy; what reached the upstream is
// asserted from the upstream's side (the demo engine's /demo/stats).
#include "routing/policy.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <thread>

#include "stream/observer.hpp"
#include "support/observed.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

namespace json = boost::json;

const std::string routes =
    "routes:\n"
    "  - name: exact\n"
    "    models: [gpt-4o-mini]\n"
    "    targets: [{upstream: demo, model: real-mini}]\n"
    "    max_output_tokens: {default: 5, ceiling: 8, mode: clamp}\n"
    "  - name: alias\n"
    "    models: [fast]\n"
    "    targets: [{upstream: demo, model: demo-fast}]\n"
    "    max_output_tokens: {ceiling: 8, mode: reject}\n"
    "  - name: glob\n"
    "    models: ['claude-*']\n"
    "    targets: [{upstream: demo}]\n"
    "    max_output_tokens: {ceiling: 8}\n"
    "    max_prompt_bytes: 2000\n";

fixture_options with_routes(const std::string& more = "") {
  fixture_options o;
  o.top_extra = routes + more;
  return o;
}

http_response post(proxy_fixture& f, const std::string& path, const std::string& body,
                   const std::string& headers = "") {
  http_client c(f.port());
  c.send(post_json(path, body, headers));
  return read_response(c);
}

json::object sent_body(proxy_fixture& f) {
  return json::parse(f.engine_last_request().at("body").as_string()).as_object();
}

TEST(Policy, ModelRoutingRewritesTheModelUpstream) {
  proxy_fixture f(with_routes());
  EXPECT_EQ(post(f, "/v1/chat/completions", R"({"model":"gpt-4o-mini","max_tokens":2})").status,
            200);
  EXPECT_EQ(sent_body(f).at("model").as_string(), "real-mini");
  EXPECT_EQ(post(f, "/v1/chat/completions", R"({"model":"fast","max_tokens":2})").status, 200);
  EXPECT_EQ(sent_body(f).at("model").as_string(), "demo-fast");
  EXPECT_EQ(post(f, "/v1/messages", R"({"model":"claude-3-haiku","max_tokens":2})").status, 200);
  EXPECT_EQ(sent_body(f).at("model").as_string(), "claude-3-haiku");
  auto missing = post(f, "/v1/chat/completions", R"({"model":"gpt-5"})");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(error_code_of(missing), "model_not_found");
  EXPECT_NE(missing.body.find("gpt-5"), std::string::npos);
  EXPECT_EQ(f.engine_stats().requests.load(), 3u);
}

TEST(Policy, BadRequestsNeverReachTheUpstream) {
  proxy_fixture f(with_routes());
  for (std::string body :
       {"{not json", "[1]", R"({"messages":[]})", R"({"model":"fast","stream":1})",
        R"({"model":"fast","max_tokens":-1})", R"({"model":"fast","max_tokens":1e309})",
        R"({"model":"fast","max_tokens":"100"})",
        R"({"model":"fast","max_tokens":18446744073709551616})",
        "{\"model\":\"fast\",\"x\":\"\xff\"}"}) {
    auto r = post(f, "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_TRUE(json::parse(r.body).as_object().contains("error")) << body;
  }
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
}

// {"max_tokens":16,…,"max_tokens":1000000} would reach an engine that
// honours the last one with a limit the policy never saw.
TEST(Policy, APolicyMemberNamedTwiceIsRefusedAndLoggedAsTheClients) {
  proxy_fixture f(with_routes());
  auto r = post(
      f, "/v1/chat/completions",
      R"({"model":"fast","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"max_tokens":1000000})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_code_of(r), "duplicate_member");
  EXPECT_NE(json::parse(r.body).at("error").at("message").as_string().find("'max_tokens'"),
            std::string::npos);
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
  // (Counted once the answer is written: the client may read it first.)
  EXPECT_TRUE(wait_until(
      [&] {
        return http_get(f.admin_port(), "/metrics")
                   .body.find(
                       "tokengate_request_errors_total{side=\"client\",code=\"duplicate_member\"} "
                       "1") != std::string::npos;
      },
      2s, "the error to be counted by side and code"));
}

TEST(Policy, ModelsListComesFromThePolicy) {
  proxy_fixture f(with_routes());
  auto r = http_get(f.port(), "/v1/models");
  EXPECT_EQ(r.status, 200);
  auto data = json::parse(r.body).at("data").as_array();
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[0].at("id").as_string(), "gpt-4o-mini");
  EXPECT_EQ(data[1].at("id").as_string(), "fast");
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
}

TEST(Policy, DefaultLimitIsInjected) {
  proxy_fixture f(with_routes());
  auto r = post(f, "/v1/chat/completions", R"({"model":"gpt-4o-mini"})");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(sent_body(f).at("max_tokens").as_int64(), 5);
  EXPECT_EQ(json::parse(r.body).at("usage").at("completion_tokens").as_int64(), 5);
}

TEST(Policy, EverySpellingIsClampedWithAHeader) {
  proxy_fixture f(with_routes());
  struct spelling {
    std::string path, body, field;
  };
  for (const auto& s : std::vector<spelling>{
           {"/v1/chat/completions", R"({"model":"gpt-4o-mini","max_tokens":50})", "max_tokens"},
           {"/v1/chat/completions", R"({"model":"gpt-4o-mini","max_completion_tokens":50})",
            "max_completion_tokens"},
           {"/v1/completions", R"({"model":"gpt-4o-mini","prompt":"x","max_tokens":50})",
            "max_tokens"},
           {"/v1/responses", R"({"model":"gpt-4o-mini","input":"x","max_output_tokens":50})",
            "max_output_tokens"},
           {"/v1/messages", R"({"model":"claude-x","max_tokens":50})", "max_tokens"},
           {"/v1/chat/completions", R"({"model":"gpt-4o-mini","n_predict":50})", "n_predict"},
       }) {
    auto r = post(f, s.path, s.body);
    EXPECT_EQ(r.headers["x-tokengate-limit-clamped"], "requested=50; applied=8") << s.body;
    EXPECT_EQ(sent_body(f).at(s.field).as_int64(), 8) << s.body;
  }
  post(f, "/v1/chat/completions", R"({"model":"gpt-4o-mini","options":{"num_predict":50}})");
  EXPECT_EQ(sent_body(f).at("options").at("num_predict").as_int64(), 8);
}

TEST(Policy, RejectModeNamesTheLimit) {
  proxy_fixture f(with_routes());
  auto r = post(f, "/v1/chat/completions", R"({"model":"fast","max_completion_tokens":9})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_code_of(r), "max_tokens_exceeded");
  EXPECT_NE(r.body.find("maximum of 8"), std::string::npos) << r.body;
  EXPECT_EQ(post(f, "/v1/chat/completions", R"({"model":"fast","max_completion_tokens":8})").status,
            200);
}

TEST(Policy, UpstreamGetsTheSpellingItHonours) {
  fixture_options o = with_routes();
  o.honour_limit = "max_tokens";  // like llama.cpp's server
  o.upstream_extra = "    limit_field: max_tokens\n";
  proxy_fixture f(o);
  auto r = post(f, "/v1/chat/completions", R"({"model":"gpt-4o-mini","max_completion_tokens":3})");
  ASSERT_EQ(r.status, 200);
  auto sent = sent_body(f);
  EXPECT_EQ(sent.at("max_tokens").as_int64(), 3);
  EXPECT_FALSE(sent.contains("max_completion_tokens"));
  EXPECT_EQ(json::parse(r.body).at("usage").at("completion_tokens").as_int64(), 3);
}

// An engine that ignores the limit (it sends 40 tokens): the proxy must end
// the stream itself, properly, and close the upstream.
stream::stream_facts cut_off_stream(const std::string& path, const std::string& model, int limit) {
  proxy_fixture f(with_routes());
  http_client c(f.port());
  c.send(post_json(path, R"({"model":")" + model + R"(","stream":true,"max_tokens":)" +
                             std::to_string(limit) +
                             R"(,"demo":{"tokens":40,"interval_ms":5,"ignore_limit":true}})"));
  auto r = read_response(c);
  EXPECT_TRUE(r.complete);
  EXPECT_TRUE(wait_until([&] { return f.engine_stats().cancelled.load() == 1; }, 2s,
                         "the upstream to be closed"));
  return observed(r.body, dialect_for_path(path));
}

TEST(Policy, StreamIsCutWhenTheUpstreamIgnoresTheLimit) {
  auto facts = cut_off_stream("/v1/chat/completions", "gpt-4o-mini", 4);
  EXPECT_EQ(facts.content_events, 4u);
  EXPECT_EQ(facts.finish_reason, "length");
  EXPECT_EQ(facts.terminator, "data: [DONE]");
  EXPECT_TRUE(facts.ended_properly());
}

TEST(Policy, AnthropicStreamIsCutWithMessageStop) {
  auto facts = cut_off_stream("/v1/messages", "claude-x", 3);
  EXPECT_EQ(facts.content_events, 3u);
  EXPECT_EQ(facts.finish_reason, "max_tokens");
  EXPECT_EQ(facts.terminator, "event: message_stop");
  EXPECT_TRUE(facts.ended_properly());
}

TEST(Policy, PromptTooLargeIs413) {
  proxy_fixture f(with_routes());
  auto r = post(f, "/v1/messages",
                R"({"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":")" +
                    std::string(3000, 'a') + "\"}]}");
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(error_code_of(r), "prompt_too_large");
}

// Bodies of known length over 16 KiB are read straight into place (not
// through the parser): sent in pieces, pipelined back to back, they reach the
// upstream intact, with only the policy's fields changed.
TEST(Policy, LongPromptsArriveIntactInPiecesAndPipelined) {
  proxy_fixture f(with_routes());
  std::string text;
  for (int i = 0; i < 30000; ++i) text += "token " + std::to_string(i) + " \u00e9 ";  // ~450 KB
  auto body = [&](int n) {
    return R"({"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":")" +
           text + "#" + std::to_string(n) + R"("}]})";
  };
  auto both =
      post_json("/v1/chat/completions", body(1)) + post_json("/v1/chat/completions", body(2));
  http_client c(f.port());
  // In pieces that cut heads and bodies at odd places.
  for (std::size_t at = 0; at < both.size(); at += 99'991) {
    c.send(both.substr(at, 99'991));
    std::this_thread::sleep_for(5ms);
  }
  auto first = read_response(c);
  ASSERT_TRUE(first.complete);
  EXPECT_EQ(first.status, 200);
  c.consume(first.body_offset + first.body.size());
  auto second = read_response(c);
  ASSERT_TRUE(second.complete);
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(f.engine_stats().requests.load(), 2u);
  // Byte for byte: the original around the two changed values.
  auto expected = body(2);
  expected.replace(expected.find("gpt-4o-mini"), 11, "real-mini");
  expected.replace(expected.find("\"max_tokens\":50"), 15, "\"max_tokens\":8");
  EXPECT_TRUE(f.engine_last_request().at("body").as_string() == expected);
  auto sent = sent_body(f);  // the second one
  EXPECT_EQ(sent.at("model").as_string(), "real-mini");
  EXPECT_EQ(sent.at("max_tokens").as_int64(), 8);  // clamped to the ceiling
  auto content = sent.at("messages").at(0).at("content").as_string();
  EXPECT_EQ(content.size(), json::parse("\"" + text + "#2\"").as_string().size());
  EXPECT_TRUE(content.ends_with("#2"));
  EXPECT_EQ(content, json::parse("\"" + text + "#2\"").as_string());
}

// A body larger than the socket buffers between the proxy and the upstream
// (7 MB; the kernel takes a few MB at once): the write to the upstream falls
// short and the rest follows, every byte once and in order.
TEST(Policy, AMultiMegabytePromptReachesTheUpstreamWholeWhenTheWriteFallsShort) {
  proxy_fixture f(with_routes());
  std::string text;
  for (int i = 0; text.size() < 7'000'000; ++i) text += "word " + std::to_string(i) + " ";
  // (No modelled prefill: the demo engine would take seconds on 7 MB.)
  auto body =
      R"({"model":"gpt-4o-mini","max_tokens":50,"demo":{"ttft_ms":0},"messages":[{"role":"user","content":")" +
      text + R"("}]})";
  auto r = post(f, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  auto expected = body;
  expected.replace(expected.find("gpt-4o-mini"), 11, "real-mini");
  expected.replace(expected.find("\"max_tokens\":50"), 15, "\"max_tokens\":8");
  auto received = f.engine_last_request().at("body").as_string();
  EXPECT_EQ(received.size(), expected.size());
  EXPECT_TRUE(received == expected)
      << "the upstream's bytes differ from the client's around the two changes";
}

TEST(Policy, ClientKeysGateAccessAndNeverReachTheUpstream) {
  ::setenv("TG_POLICY_UPSTREAM_KEY", "sk-provider-1", 1);
  auto o = with_routes("keys:\n  - {name: team, sha256: " + routing::sha256_hex("sk-client-1") +
                       ", models: ['gpt-4o*'], max_output_tokens: 2}\n");
  o.upstream_extra = "    api_key: ${TG_POLICY_UPSTREAM_KEY}\n";
  proxy_fixture f(o);
  EXPECT_EQ(post(f, "/v1/chat/completions", R"({"model":"gpt-4o-mini"})").status, 401);
  EXPECT_EQ(post(f, "/v1/chat/completions", R"({"model":"gpt-4o-mini"})",
                 "Authorization: Bearer nope\r\n")
                .status,
            401);
  EXPECT_EQ(post(f, "/v1/chat/completions", R"({"model":"fast"})",
                 "Authorization: Bearer sk-client-1\r\n")
                .status,
            403);
  auto r =
      post(f, "/v1/chat/completions", R"({"model":"gpt-4o-mini"})", "x-api-key: sk-client-1\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(sent_body(f).at("max_tokens").as_int64(), 2);  // the key's ceiling
  auto headers = f.engine_last_request().at("headers").as_object();
  EXPECT_EQ(headers.at("Authorization").as_string(), "Bearer sk-provider-1");
  EXPECT_FALSE(headers.contains("x-api-key"));
  EXPECT_EQ(f.engine_stats().requests.load(), 1u);
}

config::demo_engine_settings failing_engine(int status) {
  config::demo_engine_settings s;
  s.fail_status = status;
  return s;
}

fixture_options fallback_setup(const std::string& first_upstream_yaml,
                               std::vector<config::demo_engine_settings> extra = {}) {
  fixture_options o;
  o.extra_engines = std::move(extra);
  o.more_upstreams = "  first:\n" + first_upstream_yaml;
  o.top_extra =
      "health: {eject_after: 2, cooldown: 60s}\n"
      "routes:\n"
      "  - models: [m]\n"
      "    retry_backoff: 1ms\n"
      "    targets: [{upstream: first, weight: 1}, {upstream: demo, weight: 0}]\n";
  return o;
}

void expect_fallback_served(proxy_fixture& f) {
  auto r = post(f, "/v1/chat/completions", R"({"model":"m","max_tokens":2})");
  EXPECT_EQ(r.status, 200) << r.body;
  // The engine counts an answer after its last write: wait for it.
  EXPECT_TRUE(wait_until([&] { return f.engine_stats().completed.load() == 1; }, 2s,
                         "the fallback target's answer"));
  auto metrics = http_get(f.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("tokengate_upstream_rq_fallback_total 1\n"), std::string::npos) << metrics;
}

TEST(Fallback, OnConnectError) {
  proxy_fixture f(fallback_setup("    base_url: http://127.0.0.1:1/v1\n"));
  expect_fallback_served(f);
}

TEST(Fallback, On5xx) {
  proxy_fixture f(
      fallback_setup("    base_url: http://127.0.0.1:{engine1}/v1\n", {failing_engine(503)}));
  expect_fallback_served(f);
  // Tried once more on the same target (retry.same_target), then the next.
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 2u);
}

TEST(Fallback, On429) {
  proxy_fixture f(
      fallback_setup("    base_url: http://127.0.0.1:{engine1}/v1\n", {failing_engine(429)}));
  expect_fallback_served(f);
}

TEST(Fallback, OnFirstByteTimeout) {
  config::demo_engine_settings slow;
  slow.prefill_base = std::chrono::seconds(5);
  proxy_fixture f(fallback_setup(
      "    base_url: http://127.0.0.1:{engine1}/v1\n    timeouts: {first_byte: 200ms}\n", {slow}));
  auto start = clock::now();
  expect_fallback_served(f);
  EXPECT_LT(clock::now() - start, 2s);
}

TEST(Fallback, NeverAfterTheFirstByte) {
  config::demo_engine_settings spare;
  fixture_options o;
  o.extra_engines = {spare};
  o.more_upstreams = "  spare:\n    base_url: http://127.0.0.1:{engine1}/v1\n";
  o.top_extra =
      "routes:\n  - models: [m]\n    targets: [{upstream: demo, weight: 1}, {upstream: spare, "
      "weight: 0}]\n";
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json(
      "/v1/chat/completions",
      R"({"model":"m","stream":true,"demo":{"tokens":10,"interval_ms":5,"reset_after":2}})"));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  EXPECT_TRUE(observed(r.body).error) << "the client is told, not silently retried";
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 0u)
      << "no retry once bytes reached the client";
}

TEST(Fallback, EjectedTargetIsSkipped) {
  proxy_fixture f(fallback_setup("    base_url: http://127.0.0.1:1/v1\n"));
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(post(f, "/v1/chat/completions", R"({"model":"m","max_tokens":1})").status, 200);
  // Two workers each learn on their own: at most eject_after (2) fallbacks per worker.
  auto metrics = http_get(f.admin_port(), "/metrics").body;
  const std::string sample = "\ntokengate_upstream_rq_fallback_total ";
  auto pos = metrics.find(sample);
  ASSERT_NE(pos, std::string::npos);
  auto fallbacks = std::stoi(metrics.substr(pos + sample.size()));
  EXPECT_LE(fallbacks, 4);
  EXPECT_GE(fallbacks, 2);
  // Each worker that saw eject_after failures ejected the upstream once.
  const std::string ejections = "\ntokengate_upstream_ejections_total ";
  pos = metrics.find(ejections);
  ASSERT_NE(pos, std::string::npos);
  auto ejected = std::stoi(metrics.substr(pos + ejections.size()));
  EXPECT_GE(ejected, 1);
  EXPECT_LE(ejected, 2);
}

TEST(Policy, WeightsSpreadTraffic) {
  fixture_options o;
  o.top_extra =
      "routes:\n  - models: [w]\n    targets: [{upstream: demo, model: a, weight: 3}, {upstream: "
      "demo, model: b, weight: 1}]\n";
  proxy_fixture f(o);
  http_client c(f.port());
  for (int i = 0; i < 400; ++i) {
    c.send(
        post_json("/v1/chat/completions", R"({"model":"w","max_tokens":1,"demo":{"ttft_ms":0}})"));
    ASSERT_EQ(read_response(c).status, 200);
    c.clear();
  }
  auto by_model = f.engine_stats_json().at("by_model").as_object();
  double a = static_cast<double>(by_model.at("a").as_int64());
  EXPECT_NEAR(a / 400.0, 0.75, 0.08);
}

TEST(Reload, UnderLoadNoRequestFails) {
  proxy_fixture f(with_routes());
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t)
    clients.emplace_back([&] {
      while (!stop) {
        http_client c(f.port());
        c.send(post_json(
            "/v1/chat/completions",
            R"({"model":"gpt-4o-mini","stream":true,"max_tokens":3,"demo":{"interval_ms":5}})"));
        auto r = read_response(c);
        (r.status == 200 && r.complete && observed(r.body).ended_properly() ? ok : failed)++;
      }
    });
  const std::string alternate = routes;
  std::string renamed = routes;
  renamed.replace(renamed.find("model: real-mini"), 16, "model: real-maxi");
  // Each reload while requests run: the next one once a request has ended
  // under it.
  for (int i = 0; i < 20; ++i) {
    f.reload_with(i % 2 ? alternate : renamed);
    int ended = ok.load() + failed.load();
    EXPECT_TRUE(wait_until([&] { return ok.load() + failed.load() > ended; }, 5s,
                           "a request under the reload"));
  }
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(ok.load(), 20);
  f.reload_with(renamed);
  post(f, "/v1/chat/completions", R"({"model":"gpt-4o-mini","max_tokens":1})");
  EXPECT_EQ(sent_body(f).at("model").as_string(), "real-maxi");
}

}  // namespace
}  // namespace tokengate::test
