// Attempts that fail before anything reached the client, judged as a
// careful client judges them (upstream/retry_policy.hpp), against the
// demo engine taught each fault: a transient 5xx or 429 is tried again on
// the same target (a 429 after its Retry-After), a timeout or a refusal
// moves on at once, a prompt too long for one target goes to one with
// more context, a policy refusal reaches the client unchanged.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <chrono>

#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"
#include "support/observed.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test::retries {
namespace {

namespace json = boost::json;
using clock = std::chrono::steady_clock;

// A route over two engines: "spare" (the fixture's own) after "first".
fixture_options two_targets(config::demo_engine_settings first, const std::string& first_yaml = "",
                            const std::string& route_yaml = "") {
  fixture_options o;
  o.extra_engines = {std::move(first)};
  o.more_upstreams = "  first:\n    base_url: http://127.0.0.1:{engine1}/v1\n" + first_yaml;
  o.top_extra =
      "routes:\n"
      "  - models: [m]\n"
      "    retry_backoff: 1ms\n" +
      route_yaml + "    targets: [{upstream: first, weight: 1}, {upstream: demo, weight: 0}]\n";
  return o;
}

http_response ask(proxy_fixture& f, const std::string& knobs, const std::string& more = "") {
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"m","max_tokens":3,"messages":[{"role":"user","content":"hi"}],)"
                   R"("demo":)" +
                       knobs + more + "}"));
  return read_response(c);
}

// A prompt of about a dozen tokens (the demo engine counts bytes / 4).
http_response ask_long(proxy_fixture& f) {
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"m","max_tokens":3,"messages":[{"role":"user",)"
                   R"("content":"a prompt of a dozen tokens or so, too long for two"}]})"));
  return read_response(c);
}

std::uint64_t retries_counted(proxy_fixture& f, const std::string& reason) {
  auto page = http_get(f.admin_port(), "/metrics").body;
  auto at =
      page.find("tokengate_upstream_retries_total{route=\"route0\",upstream=\"first\",reason=\"" +
                reason + "\"} ");
  if (at == std::string::npos) return 0;
  return std::stoull(page.substr(page.find("} ", at) + 2));
}

TEST(Retries, ATransient500IsTriedAgainOnTheSameTarget) {
  proxy_fixture f(two_targets({}));
  auto r = ask(f, R"({"status":500,"fail_times":1})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 2u);
  EXPECT_EQ(f.engine_stats().requests.load(), 0u) << "no fallback needed";
  EXPECT_EQ(retries_counted(f, "server_error"), 1u);
}

// A whole answer is held until its body's end: one cut mid-body reaches
// the client as nothing, and is asked again of the same target once, then
// of the next; with no target left the client gets a 502, never half a body.
TEST(Retries, AWholeAnswerCutMidBodyIsAskedAgain) {
  proxy_fixture f(two_targets({}));
  auto r = ask(f, R"({"tokens":12,"reset_after":1,"fail_times":1})", R"(,"stream":false)");
  ASSERT_EQ(r.status, 200) << r.body;
  auto body = json::parse(r.body).as_object();
  EXPECT_EQ(body.at("usage").at("completion_tokens"), 3);  // (max_tokens: 3)
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 2u) << "the same target again";
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);

  // Cut every time: the same target once more, then the next (cut too).
  auto cut_always = ask(f, R"({"tokens":12,"reset_after":1})", R"(,"stream":false)");
  EXPECT_EQ(cut_always.status, 502) << cut_always.body;
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 4u);
  EXPECT_EQ(f.engine_stats().requests.load(), 1u);
}

TEST(Retries, AWholeAnswerCutOnEveryTargetIsA502NotHalfABody) {
  fixture_options o;
  o.top_extra = "routes:\n  - {models: [m], targets: [{upstream: demo}], retry_backoff: 1ms}\n";
  proxy_fixture f(o);
  auto r = ask(f, R"({"tokens":12,"reset_after":6,"ignore_limit":true})", R"(,"stream":false)");
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_EQ(error_code_of(r), "upstream_disconnected");
  EXPECT_EQ(f.engine_stats().requests.load(), 2u) << "tried twice on its one target";
}

TEST(Retries, A429WaitsForItsRetryAfterThenTriesTheSameTarget) {
  proxy_fixture f(two_targets({}));
  auto start = clock::now();
  auto r = ask(f, R"({"status":429,"fail_times":1,"retry_after":1})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_GE(clock::now() - start, 900ms) << "Retry-After: 1 was not honoured";
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 2u);
  EXPECT_EQ(retries_counted(f, "rate_limited"), 1u);
}

TEST(Retries, A429WithoutRetryAfterBacksOffThenRetries) {
  proxy_fixture f(two_targets({}));
  auto start = clock::now();
  auto r = ask(f, R"({"status":429,"fail_times":2,"retry_after":-1})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_GE(clock::now() - start, 100ms);  // (the backoff's floor for a rate limit, jittered)
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 3u);
}

TEST(Retries, ARetryAfterPastTheCapMovesOnAtOnce) {
  config::demo_engine_settings limited;
  limited.fail_status = 429;
  limited.fail_retry_after = 30;
  proxy_fixture f(two_targets(limited, "", "    retry: {retry_after_cap: 2s}\n"));
  auto start = clock::now();
  auto r = ask(f, "{}");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_LT(clock::now() - start, 1s);
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 1u);
  EXPECT_EQ(f.engine_stats().requests.load(), 1u) << "served by the next target";
}

TEST(Retries, ATimeoutIsNotTriedAgainOnTheSameTarget) {
  config::demo_engine_settings slow;
  slow.prefill_base = std::chrono::seconds(3);
  proxy_fixture f(two_targets(slow, "    timeouts: {first_byte: 200ms}\n"));
  auto start = clock::now();
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"m","max_tokens":2,"messages":[]})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_LT(clock::now() - start, 1s);
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 1u);
}

TEST(Retries, APromptTooLongGoesToATargetWithMoreContext) {
  config::demo_engine_settings small;
  small.context_tokens = 2;
  auto o = two_targets(small, "    capacity: {max_context_tokens: 4000}\n");
  o.upstream_extra = "    capacity: {max_context_tokens: 128000}\n";
  proxy_fixture f(o);
  auto r = ask_long(f);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 1u);
  EXPECT_EQ(f.engine_stats().requests.load(), 1u);
}

TEST(Retries, APromptTooLongWithNoLargerTargetGetsTheProvidersOwn400) {
  config::demo_engine_settings small;
  small.context_tokens = 2;
  // (the fixture's engine declares no more context than the first)
  proxy_fixture f(two_targets(small, "    capacity: {max_context_tokens: 4000}\n"));
  auto r = ask_long(f);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body).at("error").at("code").as_string(), "context_length_exceeded");
  EXPECT_NE(r.body.find("maximum context length is 2 tokens"), std::string::npos) << r.body;
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
}

TEST(Retries, APolicyRefusalReachesTheClientUnchangedWithoutRetryOrFallback) {
  proxy_fixture f(two_targets({}));
  auto r = ask(f, R"({"policy_refusal":true})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body).at("error").at("code").as_string(), "content_policy_violation");
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 1u);
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
}

TEST(Retries, PastThePerTargetBoundAFailureMovesOn) {
  config::demo_engine_settings failing;
  failing.fail_status = 500;
  proxy_fixture f(two_targets(failing, "", "    retry: {per_target: {retries: 0, window: 1m}}\n"));
  auto r = ask(f, "{}");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 1u);
  EXPECT_EQ(f.engine_stats().requests.load(), 1u);
}

TEST(Retries, TheLastTargetsOwnAnswerReachesTheClientWhenRetriesRunOut) {
  fixture_options o;
  o.top_extra =
      "routes:\n  - models: [m]\n    retry_backoff: 1ms\n    targets: [{upstream: demo}]\n";
  proxy_fixture f(o);
  auto r = ask(f, R"({"status":503})");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(f.engine_stats().requests.load(), 2u);  // the try, and one more
}

// timeouts.first_token: a target that sends its head at once but no token
// in time is left for the next, the client none the wiser: one opening,
// one answer.
fixture_options slow_first_token_then_a_quick_one() {
  config::demo_engine_settings slow;  // its head at once, its first token after 3 s
  slow.prefill_base = std::chrono::seconds(3);
  return two_targets(slow, "    timeouts: {first_token: 300ms}\n");
}

TEST(FirstToken, ASilentTargetIsLeftForTheNextOneBeforeTheClientSeesAByte) {
  for (std::string path : {"/v1/chat/completions", "/v1/messages", "/v1/responses"}) {
    proxy_fixture f(slow_first_token_then_a_quick_one());
    auto start = clock::now();
    http_client c(f.port());
    const bool responses = path == "/v1/responses";
    c.send(post_json(
        path, std::string(R"({"model":"m","stream":true,)") +
                  (responses ? R"("max_output_tokens":5,"input":"hi")"
                             : R"("max_tokens":5,"messages":[{"role":"user","content":"hi"}])") +
                  "}"));
    auto r = read_response(c);
    EXPECT_EQ(r.status, 200) << path << " " << r.body;
    EXPECT_LT(clock::now() - start, 2s) << path;
    auto facts = observed(r.body, dialect_for_path(path));
    EXPECT_TRUE(facts.ended_properly()) << path << " " << r.body;
    EXPECT_EQ(facts.content_events, 5u) << path;
    // One opening: the first target's was never sent.
    const std::string opening = path == "/v1/messages" ? R"("type":"message_start")"
                                : responses            ? R"("type":"response.created")"
                                                       : R"("delta":{"role":"assistant")";
    std::size_t n = 0;
    for (auto at = r.body.find(opening); at != std::string::npos; at = r.body.find(opening, at + 1))
      ++n;
    EXPECT_EQ(n, 1u) << path << ": " << opening << " in " << r.body;
    EXPECT_EQ(f.extra_engine_stats(1).requests.load(), 1u) << path;
    EXPECT_EQ(f.engine_stats().requests.load(), 1u) << path;
  }
}

TEST(FirstToken, TheClientsConnectionIsKeptForItsNextRequest) {
  proxy_fixture f(slow_first_token_then_a_quick_one());
  http_client c(f.port());
  const auto body = post_json("/v1/chat/completions",
                              R"({"model":"m","stream":true,"max_tokens":3,"messages":[]})");
  for (int i = 0; i < 2; ++i) {
    c.send(body);
    auto r = read_response(c);
    EXPECT_EQ(r.status, 200) << i;
    EXPECT_TRUE(r.complete) << i;
    c.consume(c.raw().size());
  }
}

TEST(FirstToken, OnTheLastTargetItIsA504WithNothingHalfSent) {
  config::demo_engine_settings slow;
  slow.prefill_base = std::chrono::seconds(3);
  fixture_options o;
  o.extra_engines = {slow};
  o.more_upstreams =
      "  first:\n    base_url: http://127.0.0.1:{engine1}/v1\n    timeouts: {first_token: 300ms}\n";
  o.top_extra = "routes:\n  - models: [m]\n    targets: [{upstream: first}]\n";
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"m","stream":true,"max_tokens":5,"messages":[]})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_EQ(json::parse(r.body).at("error").at("code").as_string(), "upstream_timeout");
  EXPECT_NE(r.body.find("sent no token within 300 ms"), std::string::npos) << r.body;
}

TEST(FirstToken, AQuickStreamIsRelayedAsEver) {
  fixture_options o;
  o.upstream_extra = "    timeouts: {first_token: 2s}\n";
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"demo","stream":true,"max_tokens":4,"messages":[]})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 200);
  auto facts = observed(r.body, dialect::openai_chat);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.content_events, 4u);
}

}  // namespace
}  // namespace tokengate::test::retries
