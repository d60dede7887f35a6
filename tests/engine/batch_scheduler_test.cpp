// The demo engine's realistic mode (engine/batch_scheduler): slots bound
// what runs and the rest wait in order; a prompt that starts like an
// earlier one finds its blocks cached; with chunked prefill a decoding
// sequence goes on producing while a long prompt prefills; the metrics
// page speaks vLLM's names.
#include "engine/batch_scheduler.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

namespace tokengate::engine {
namespace {

using namespace std::chrono_literals;

config::demo_engine_settings engine(int slots, long long chunked = 0) {
  config::demo_engine_settings s;
  s.slots = slots;
  s.decode_tokens_per_second = 200;  // a step of 5 ms
  s.prefill_base = std::chrono::milliseconds(1);
  s.prefill_ms_per_1k_tokens = 100;
  s.chunked_prefill_tokens = chunked;
  return s;
}

std::string text(char c, std::size_t bytes) { return std::string(bytes, c); }

// Runs the engine until `done` (or 2 s: a loaded machine's timers run late).
template <typename Done>
bool run_until(net::io_context& io, Done done) {
  for (int i = 0; i < 200 && !done(); ++i) io.run_for(10ms);
  return done();
}

TEST(BatchScheduler, SlotsBoundWhatRunsTheRestWait) {
  net::io_context io;
  batch_scheduler b(io.get_executor(), engine(2));
  b.start();
  auto blocks = batch_scheduler::prompt_blocks(text('a', 64));
  auto s1 = b.submit(blocks, 16, 1000), s2 = b.submit(blocks, 16, 1000),
       s3 = b.submit(blocks, 16, 1000);
  io.run_for(50ms);
  EXPECT_TRUE(s1->admitted && s2->admitted);
  EXPECT_FALSE(s3->admitted);
  EXPECT_EQ(s3->produced, 0);
  EXPECT_NE(b.prometheus().find("vllm:num_requests_waiting{model_name=\"demo\"} 1"),
            std::string::npos);
  b.release(*s1);  // its slot goes to the one waiting
  EXPECT_TRUE(s3->admitted);
  EXPECT_TRUE(run_until(io, [&] { return s3->produced > 0; }));
}

TEST(BatchScheduler, APromptThatStartsLikeAnEarlierOneFindsItCached) {
  net::io_context io;
  batch_scheduler b(io.get_executor(), engine(4));
  b.start();
  const auto history = text('h', 4000);  // 1,000 tokens
  auto first = b.submit(batch_scheduler::prompt_blocks(history), 1000, 1);
  ASSERT_TRUE(run_until(io, [&] { return first->prefilled; }));
  EXPECT_EQ(first->cached_tokens, 0);
  b.release(*first);
  auto next = b.submit(batch_scheduler::prompt_blocks(history + text('q', 400)), 1100, 1);
  auto other = b.submit(batch_scheduler::prompt_blocks(text('o', 4000)), 1000, 1);
  ASSERT_TRUE(run_until(io, [&] { return next->prefilled && other->prefilled; }));
  EXPECT_GE(next->cached_tokens, 990);  // all of the history's whole blocks
  EXPECT_EQ(other->cached_tokens, 0);
  EXPECT_NE(
      b.prometheus().find("vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"4096\"}"),
      std::string::npos);
}

// Tokens a decoding sequence produces while a 5,000-token prompt (500 ms
// of prefill whole, about 600 ms in chunks) is being prefilled.
long long produced_beside_a_long_prefill(long long chunked) {
  net::io_context io;
  batch_scheduler b(io.get_executor(), engine(4, chunked));
  b.start();
  auto decoding = b.submit(batch_scheduler::prompt_blocks(text('d', 64)), 16, 1000);
  io.run_for(20ms);
  const auto before = decoding->produced;
  auto long_prompt = b.submit(batch_scheduler::prompt_blocks(text('l', 20'000)), 5000, 1);
  io.run_for(400ms);  // (the prefill is not over yet either way)
  EXPECT_FALSE(long_prompt->prefilled);
  return decoding->produced - before;
}

TEST(BatchScheduler, ChunkedPrefillKeepsTheDecodesGoing) {
  const auto whole = produced_beside_a_long_prefill(0);
  const auto chunked = produced_beside_a_long_prefill(256);
  EXPECT_LE(whole, 1);  // the prefill holds every decode
  // 256 tokens a step: 25.6 ms of prefill and 5 ms of decode, about 13
  // steps in 400 ms (fewer on a loaded machine, whose timers wake late).
  EXPECT_GE(chunked, 5);
}

}  // namespace
}  // namespace tokengate::engine
