// The fault matrix: every fault the demo engine can be taught (a 429 with
// and without Retry-After, a 500 once, a stream cut by a reset or an error
// event, a stall, a slow first token, a refused prefill, a prompt over the
// context, a content-policy refusal) × the chat, Anthropic and Responses
// APIs × streamed and whole answers. Each ends, within a bounded time, in
// either the complete answer, byte for byte an unfailed run's (its ids and
// clock fields aside), or one clean error in the client's own API; and the
// proxy stays ready and answers the next request.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <chrono>
#include <regex>

#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test::fault_matrix {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

enum class api { chat, messages, responses };
enum class outcome { complete, error };

struct fault {
  const char* name;
  const char* knobs;  // the demo engine's, besides the answer's shape
  const char* model;  // its route: "demo" (restart), "demo-prefill", "demo-context"
  outcome streamed, whole;
  std::chrono::milliseconds within;
};

// Twelve tokens, 2 ms apart; each fault only for the first request that
// carries it (fail_times), so that a retry, a fallback or a resume gets past.
const fault faults[] = {
    {"rate_limited_with_retry_after", R"("status":429,"retry_after":1,"fail_times":1)", "demo",
     outcome::complete, outcome::complete, 3s},
    {"rate_limited_without_retry_after", R"("status":429,"retry_after":-1,"fail_times":1)", "demo",
     outcome::complete, outcome::complete, 2s},
    {"server_error_once", R"("status":500,"fail_times":1)", "demo", outcome::complete,
     outcome::complete, 2s},
    {"reset_mid_answer", R"("reset_after":5,"fail_times":1)", "demo", outcome::complete,
     outcome::complete, 2s},
    {"error_event_mid_answer", R"("error_after":4,"fail_times":1)", "demo", outcome::complete,
     outcome::complete, 2s},
    {"stall_mid_answer", R"("stall_after":6,"fail_times":1)", "demo", outcome::complete,
     outcome::complete, 3s},
    // Both targets are as slow: a stream is given up at timeouts.first_token
    // on each (a 504); a whole answer has no first token to wait for.
    {"slow_first_token", R"("ttft_ms":700)", "demo", outcome::error, outcome::complete, 3s},
    {"prefill_refused", R"("reset_after":5,"fail_times":1,"refuse_prefill":true)", "demo-prefill",
     outcome::complete, outcome::complete, 2s},
    // (the first target's engine takes 2 prompt tokens; the second declares more)
    {"prompt_over_the_context", R"("ttft_ms":0)", "demo-context", outcome::complete,
     outcome::complete, 2s},
    {"content_policy_refusal", R"("policy_refusal":true)", "demo", outcome::error, outcome::error,
     2s},
};

// Two targets for each route (the same engine under two names, so that a
// fault is met once whichever answers); the context route's first target
// is an engine with a small context, its second one declares a larger one.
fixture_options matrix_fixture() {
  config::demo_engine_settings small_context;
  small_context.context_tokens = 2;
  small_context.prefill_base = std::chrono::milliseconds(5);
  small_context.default_output_tokens = 10;
  fixture_options o;
  o.extra_engines = {small_context};
  const std::string timeouts = "timeouts: {first_byte: 1s, first_token: 400ms, idle: 1s}";
  o.more_upstreams = "  a: {base_url: \"http://127.0.0.1:{engine}/v1\", " + timeouts + "}\n" +
                     "  b: {base_url: \"http://127.0.0.1:{engine}/v1\", " + timeouts + "}\n" +
                     "  small: {base_url: \"http://127.0.0.1:{engine1}/v1\", " + timeouts +
                     ", capacity: {max_context_tokens: 4000}}\n" +
                     "  large: {base_url: \"http://127.0.0.1:{engine}/v1\", " + timeouts +
                     ", capacity: {max_context_tokens: 100000}}\n";
  o.top_extra =
      "routes:\n"
      "  - {name: restart, models: [demo], targets: [{upstream: a}, {upstream: b}],\n"
      "     retry_backoff: 1ms, resume: {mode: restart}}\n"
      "  - {name: prefill, models: [demo-prefill],\n"
      "     targets: [{upstream: a, model: demo}, {upstream: b, model: demo}],\n"
      "     retry_backoff: 1ms, resume: {mode: prefill}}\n"
      "  - {name: context, models: [demo-context],\n"
      "     targets: [{upstream: small, model: demo}, {upstream: large, model: demo}],\n"
      "     retry_backoff: 1ms, resume: {mode: restart}}\n";
  return o;
}

const char* path_of(api a) {
  return a == api::chat       ? "/v1/chat/completions"
         : a == api::messages ? "/v1/messages"
                              : "/v1/responses";
}

dialect dialect_of(api a) {
  return a == api::chat       ? dialect::openai_chat
         : a == api::messages ? dialect::anthropic_messages
                              : dialect::openai_responses;
}

std::string body_of(api a, const std::string& model, bool streamed) {
  const std::string head =
      R"({"model":")" + model + R"(","stream":)" + (streamed ? "true" : "false") + ",";
  if (a == api::responses) return head + R"("input":"hi"})";
  if (a == api::messages)
    return head + R"("max_tokens":300,"messages":[{"role":"user","content":"hi"}]})";
  return head + R"("messages":[{"role":"user","content":"hi"}]})";
}

http_response ask(proxy_fixture& f, api a, const std::string& model, bool streamed,
                  const std::string& knobs) {
  http_client c(f.port());
  c.send(post_json(path_of(a), body_of(a, model, streamed),
                   R"(x-demo: {"tokens":12,"interval_ms":2,)" + knobs + "}\r\n"));
  return read_response(c, 10s);
}

// The answer without what differs between any two runs: the engine's ids
// (demo-<n>) and its clock (created, created_at).
std::string comparable(std::string body) {
  static const std::regex ids("demo-[0-9]+"), clock("\"created(_at)?\":[0-9]+");
  body = std::regex_replace(body, ids, "demo-N");
  return std::regex_replace(body, clock, "\"created$1\":0");
}

// One clean error in the client's API: a JSON error body with a status
// (nothing sent before it), or a stream whose one error event ends it.
void expect_one_clean_error(const http_response& r, api a, bool streamed) {
  ASSERT_TRUE(r.complete);
  if (r.status != 200) {
    auto body = json::parse(r.body).as_object();
    ASSERT_TRUE(body.contains("error")) << r.body;
    if (a == api::messages) {
      EXPECT_EQ(body["type"], json::value("error")) << r.body;
    }
    return;
  }
  ASSERT_TRUE(streamed) << "a whole answer's error has its own status: " << r.body;
  stream::stream_observer o(dialect_of(a), true);
  stream::sse_parser p;
  p.feed(r.body, o);
  EXPECT_TRUE(o.facts().error) << r.body;
  EXPECT_FALSE(o.facts().ended_properly()) << r.body;
}

struct matrix_case {
  const fault* f;
  api a;
  bool streamed;
};

std::string name_of(const testing::TestParamInfo<matrix_case>& info) {
  const char* apis[] = {"chat", "messages", "responses"};
  return std::string(info.param.f->name) + "_" + apis[static_cast<int>(info.param.a)] +
         (info.param.streamed ? "_streamed" : "_whole");
}

std::vector<matrix_case> all_cases() {
  std::vector<matrix_case> cases;
  for (const auto& f : faults)
    for (auto a : {api::chat, api::messages, api::responses})
      for (bool streamed : {true, false}) cases.push_back({&f, a, streamed});
  return cases;
}

class FaultMatrix : public testing::TestWithParam<matrix_case> {};

TEST_P(FaultMatrix, EndsInTheWholeAnswerOrOneCleanError) {
  const auto& [f, a, streamed] = GetParam();
  proxy_fixture fixture(matrix_fixture());
  // (every route sends its targets the model "demo")
  auto unfailed = ask(fixture, a, "demo", streamed, R"("ttft_ms":0)");
  ASSERT_EQ(unfailed.status, 200) << unfailed.body;

  auto start = std::chrono::steady_clock::now();
  auto r = ask(fixture, a, f->model, streamed, f->knobs);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, f->within);
  if ((streamed ? f->streamed : f->whole) == outcome::complete) {
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(comparable(r.body), comparable(unfailed.body));
  } else {
    expect_one_clean_error(r, a, streamed);
  }
  // Afterwards the proxy is ready, and the next request is answered.
  EXPECT_EQ(http_get(fixture.admin_port(), "/readyz").status, 200);
  auto next = ask(fixture, a, f->model, streamed, R"("ttft_ms":0)");
  EXPECT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(comparable(next.body), comparable(unfailed.body));
}

INSTANTIATE_TEST_SUITE_P(Faults, FaultMatrix, testing::ValuesIn(all_cases()), name_of);

}  // namespace
}  // namespace tokengate::test::fault_matrix
