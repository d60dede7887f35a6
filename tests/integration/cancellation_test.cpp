// The client goes away → the engine sees its connection close, on every path.
#include <gtest/gtest.h>

#include <iostream>

#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

// How long after `closed_at` the engine saw the close, in ms.
double cancel_delay_ms(const proxy_fixture& f, clock::time_point closed_at) {
  auto seen = clock::time_point(clock::duration(f.engine_stats().last_cancel_ns.load()));
  return std::chrono::duration<double, std::milli>(seen - closed_at).count();
}

void expect_engine_sees_close(proxy_fixture& f, http_client& c, bool reset, const char* path) {
  auto before = f.engine_stats().cancelled.load();
  auto closed_at = clock::now();
  if (reset)
    c.reset();
  else
    c.close();
  ASSERT_TRUE(wait_until([&] { return f.engine_stats().cancelled.load() > before; }, 2s,
                         "the engine to see the close"));
  auto delay = cancel_delay_ms(f, closed_at);
  std::cout << "[ measure ] " << path << ": upstream saw the client's close after " << delay
            << " ms\n";
  EXPECT_LT(delay, 100.0);
  EXPECT_TRUE(
      wait_until([&] { return f.engine_stats().active.load() == 0; }, 1s, "generation to stop"));
}

TEST(Cancellation, MidStreamCloseReachesTheEngine) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"demo","stream":true,"demo":{"tokens":500,"interval_ms":20}})"));
  ASSERT_TRUE(wait_until(
      [&] {
        c.read_some(10ms);
        std::size_t n = 0;
        for (auto p = c.raw().find("\"content\":\""); p != std::string::npos;
             p = c.raw().find("\"content\":\"", p + 1))
          ++n;
        return n >= 4;  // the role chunk plus three tokens
      },
      5s, "three tokens"));
  expect_engine_sees_close(f, c, false, "mid-stream");
  EXPECT_EQ(f.engine_stats().completed.load(), 0u);
}

// A request waiting on a long prefill (10 s to the first token), closed by
// its client once the engine has it.
void close_while_waiting(bool stream, const char* path_name) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", std::string(R"({"model":"demo","stream":)") +
                                               (stream ? "true" : "false") +
                                               R"(,"demo":{"ttft_ms":10000}})"));
  ASSERT_TRUE(wait_until([&] { return f.engine_stats().active.load() == 1; }, 2s,
                         "the request to reach the engine"));
  expect_engine_sees_close(f, c, false, path_name);
}

TEST(Cancellation, CloseDuringPrefillReachesTheEngine) {
  close_while_waiting(true, "during prefill");
}

TEST(Cancellation, CloseOfNonStreamingRequestReachesTheEngine) {
  close_while_waiting(false, "non-streaming");
}

TEST(Cancellation, ResetOfAnthropicStreamReachesTheEngine) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json(
      "/v1/messages",
      R"({"model":"demo","stream":true,"max_tokens":900,"demo":{"tokens":900,"interval_ms":20}})"));
  ASSERT_TRUE(wait_until(
      [&] {
        c.read_some(10ms);
        return c.raw().find("content_block_delta") != std::string::npos;
      },
      5s, "the first token"));
  expect_engine_sees_close(f, c, true, "anthropic reset");
}

}  // namespace
}  // namespace tokengate::test
