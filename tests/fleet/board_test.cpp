#include "fleet/board.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <future>
#include <thread>

#include "fleet/engine_gauges.hpp"

namespace tokengate::fleet {
namespace {

using namespace std::chrono_literals;
using outcome = std::variant<admitted, request_error>;

admission_request asking(board& b, int priority, std::optional<config::queue_settings> queue,
                         int slots = 1) {
  admission_request r;
  r.route = "r";
  r.candidates = {{&b.load_of("e1"), slots, true}};
  r.tokens = 100;
  r.priority = priority;
  r.queue = queue;
  return r;
}

// (an io_context that ran out of work stays stopped until restarted)
void run(net::io_context& io, std::chrono::milliseconds d) {
  io.restart();
  io.run_for(d);
}

// Runs `n` admissions on their own coroutines; each result lands in `out`.
void spawn(net::io_context& io, board& b, admission_request r, std::vector<outcome>& out,
           std::vector<int>& order, int id) {
  net::co_spawn(
      io,
      [&b, r, &out, &order, id]() mutable -> net::awaitable<void> {
        auto got = co_await b.admit(std::move(r));
        order.push_back(id);
        out.push_back(std::move(got));
      },
      net::detached);
}

// A request with `prefill` prompt tokens to prefill on e1, whose prefill
// budget is `budget` tokens (and with no bound on its streams).
admission_request prefilling(board& b, long long prefill, long long budget,
                             std::optional<config::queue_settings> queue) {
  admission_request r;
  r.route = "r";
  candidate c{&b.load_of("e1"), 0, true};
  c.max_prefill_tokens = budget;
  c.prefill_tokens = prefill;
  r.candidates = {c};
  r.tokens = prefill + 10;
  r.queue = queue;
  return r;
}

TEST(Admission, APrefillBudgetHoldsPromptsBackUntilAFirstTokenLeavesRoom) {
  net::io_context io;
  board b;
  const config::queue_settings queue{8, std::chrono::seconds(5)};
  std::vector<outcome> results;
  std::vector<int> order;
  spawn(io, b, prefilling(b, 3000, 4000, queue), results, order, 0);
  spawn(io, b, prefilling(b, 3000, 4000, queue), results, order, 1);  // would make 6,000
  spawn(io, b, prefilling(b, 500, 4000, queue), results, order, 2);   // fits, but is behind 1
  run(io, 20ms);
  ASSERT_EQ(order, std::vector<int>{0});
  EXPECT_EQ(b.load_of("e1").prefilling.load(), 3000);
  // The first token of the first: its prefill is over, the next two fit.
  std::get<admitted>(results[0]).held.first_token();
  run(io, 20ms);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(b.load_of("e1").prefilling.load(), 3500);
  EXPECT_EQ(b.load_of("e1").streams.load(), 3);  // decoding streams hold no prefill
  // A prompt larger than the whole budget goes alone, once nothing prefills.
  spawn(io, b, prefilling(b, 9000, 4000, queue), results, order, 3);
  run(io, 20ms);
  EXPECT_EQ(order.size(), 3u);
  std::get<admitted>(results[1]).held.first_token();
  std::get<admitted>(results[2]).held.give_back();  // (ended before any token: prefill given back)
  run(io, 20ms);
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(b.load_of("e1").prefilling.load(), 9000);
  for (auto& r : results) std::get<admitted>(r).held.give_back();
  EXPECT_EQ(b.load_of("e1").prefilling.load(), 0);
  EXPECT_EQ(b.load_of("e1").streams.load(), 0);
  EXPECT_EQ(b.load_of("e1").tokens.load(), 0);
}

TEST(Admission, APrefillBudgetWithoutAQueueRefusesWhatDoesNotFit) {
  net::io_context io;
  board b;
  std::vector<outcome> results;
  std::vector<int> order;
  spawn(io, b, prefilling(b, 3000, 4000, std::nullopt), results, order, 0);
  spawn(io, b, prefilling(b, 3000, 4000, std::nullopt), results, order, 1);
  run(io, 20ms);
  ASSERT_EQ(order.size(), 2u);
  ASSERT_TRUE(std::holds_alternative<admitted>(results[0]));
  ASSERT_TRUE(std::holds_alternative<request_error>(results[1]));
  EXPECT_EQ(std::get<request_error>(results[1]).code, "engine_overloaded");
}

TEST(Admission, ARequestWaitsForThePrefillThatBringsItsPrefix) {
  net::io_context io;
  board b;
  auto& e1 = b.load_of("e1");
  e1.index.set_capacity(1000);
  const config::queue_settings queue{8, std::chrono::seconds(5)};
  const auto document =
      std::make_shared<std::vector<std::uint64_t>>(std::vector<std::uint64_t>{11, 12, 13, 14});
  auto first = prefilling(b, 4 * 64, 0, queue);
  first.blocks = document;
  std::vector<outcome> results;
  std::vector<int> order;
  spawn(io, b, first, results, order, 0);
  run(io, 20ms);
  ASSERT_EQ(order.size(), 1u);
  ASSERT_TRUE(e1.index.pending(11));
  // A second user of the document: its prefix is pending, so it waits.
  auto second = prefilling(b, 10, 0, queue);
  second.candidates[0].waits_for_block = 11;
  second.blocks =
      std::make_shared<std::vector<std::uint64_t>>(std::vector<std::uint64_t>{11, 12, 13, 14, 15});
  spawn(io, b, second, results, order, 1);
  run(io, 20ms);
  EXPECT_EQ(order.size(), 1u);
  std::get<admitted>(results[0]).held.first_token();  // the document is cached now
  run(io, 20ms);
  ASSERT_EQ(order.size(), 2u);
  EXPECT_FALSE(e1.index.pending(11));
  EXPECT_TRUE(e1.index.pending(15));                // the second's own block, until its first token
  std::get<admitted>(results[1]).held.give_back();  // … which never came
  EXPECT_FALSE(e1.index.pending(15));
  EXPECT_EQ(e1.index.longest_match(*second.blocks).held, 4u);
  std::get<admitted>(results[0]).held.give_back();
}

TEST(Admission, AFullTargetQueuesByPriorityThenArrivalAndHandsSlotsOver) {
  net::io_context io;
  board b;
  const config::queue_settings queue{8, std::chrono::seconds(5)};
  std::vector<outcome> results;
  std::vector<int> order;
  spawn(io, b, asking(b, 1, queue), results, order, 0);  // takes the one slot
  run(io, 20ms);
  ASSERT_EQ(order, std::vector<int>{0});
  spawn(io, b, asking(b, 2, queue), results, order, 1);  // low
  spawn(io, b, asking(b, 1, queue), results, order, 2);  // normal
  spawn(io, b, asking(b, 0, queue), results, order, 3);  // high, last to arrive
  run(io, 20ms);
  EXPECT_EQ(order.size(), 1u);
  EXPECT_EQ(b.load_of("e1").streams.load(), 1);
  EXPECT_NE(b.prometheus().find("tokengate_admission_queue_length{route=\"r\"} 3"),
            std::string::npos);
  // Each slot given back goes to the best waiter: high, normal, then low.
  for (std::size_t served = 1; served <= 3; ++served) {
    std::get<admitted>(results[served - 1]).held.give_back();
    run(io, 20ms);
    ASSERT_EQ(order.size(), served + 1);
    EXPECT_EQ(b.load_of("e1").streams.load(), 1);  // handed over, never freed in between
  }
  EXPECT_EQ(order, (std::vector<int>{0, 3, 2, 1}));
  EXPECT_GT(std::get<admitted>(results[3]).waited.count(), 0);
  std::get<admitted>(results[3]).held.give_back();
  EXPECT_EQ(b.load_of("e1").streams.load(), 0);
  EXPECT_EQ(b.load_of("e1").tokens.load(), 0);
}

TEST(Admission, RefusalsSayWhyAndWhenToComeBack) {
  net::io_context io;
  board b;
  std::vector<outcome> results;
  std::vector<int> order;
  spawn(io, b, asking(b, 1, std::nullopt), results, order, 0);
  spawn(io, b, asking(b, 1, std::nullopt), results, order, 1);  // no queue: refused at once
  run(io, 20ms);
  ASSERT_EQ(results.size(), 2u);
  auto& none = std::get<request_error>(results[1]);
  EXPECT_EQ(none.status, 503u);
  EXPECT_EQ(none.code, "engine_overloaded");
  EXPECT_GE(none.retry_after_s, 1);

  const config::queue_settings one{1, std::chrono::milliseconds(100)};
  spawn(io, b, asking(b, 1, one), results, order, 2);  // waits
  spawn(io, b, asking(b, 1, one), results, order, 3);  // the queue is full
  run(io, 20ms);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(std::get<request_error>(results[2]).status, 429u);
  EXPECT_EQ(std::get<request_error>(results[2]).code, "queue_full");
  run(io, 200ms);  // the waiter's timeout passes
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(std::get<request_error>(results[3]).code, "queue_timeout");
  auto text = b.prometheus();
  for (auto reason : {"no_capacity", "queue_full", "queue_timeout"})
    EXPECT_NE(text.find(std::string("reason=\"") + reason + "\"} 1"), std::string::npos) << text;
  EXPECT_EQ(b.load_of("e1").streams.load(), 1);  // only the first holds a slot
}

TEST(Admission, UnboundedTargetsCountLoadWithoutWaiting) {
  net::io_context io;
  board b;
  std::vector<outcome> results;
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) spawn(io, b, asking(b, 1, std::nullopt, 0), results, order, i);
  run(io, 20ms);
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(b.load_of("e1").streams.load(), 5);
  EXPECT_EQ(b.load_of("e1").tokens.load(), 500);
  results.clear();
  EXPECT_EQ(b.load_of("e1").streams.load(), 0);
}

TEST(Admission, SlotsGoBackAcrossThreads) {
  // Waiters on one thread, slots given back on another: each waiter is
  // woken on its own thread and none is lost.
  net::io_context waiting, freeing;
  board b;
  const config::queue_settings queue{1000, std::chrono::seconds(10)};
  std::vector<outcome> held, results;
  std::vector<int> order, unused;
  for (int i = 0; i < 4; ++i) spawn(freeing, b, asking(b, 1, queue, 4), held, unused, i);
  run(freeing, 20ms);
  ASSERT_EQ(held.size(), 4u);
  for (int i = 0; i < 200; ++i) spawn(waiting, b, asking(b, 1, queue, 4), results, order, i);
  std::thread t([&] {
    auto work = net::make_work_guard(waiting);
    waiting.run_for(3s);
  });
  // Each admitted waiter gives its slot back at once, from this thread.
  std::size_t released = 0;
  for (auto& h : held) std::get<admitted>(h).held.give_back();
  while (released < 200) {
    std::this_thread::sleep_for(1ms);
    // (results grows on the waiting thread: read it there)
    std::promise<std::size_t> count;
    net::post(waiting, [&] {
      while (released < results.size()) std::get<admitted>(results[released++]).held.give_back();
      count.set_value(released);
    });
    count.get_future().wait();
  }
  waiting.stop();
  t.join();
  EXPECT_EQ(order.size(), 200u);
  EXPECT_EQ(b.load_of("e1").streams.load(), 0);
}

TEST(Admission, AConversationWaitsForItsReplicaThenTakesAnother) {
  net::io_context io;
  board b;
  const config::queue_settings queue{8, std::chrono::seconds(5)};
  auto conversation = [&] {
    admission_request r;
    r.route = "r";
    r.candidates = {{&b.load_of("home"), 1, true}, {&b.load_of("other"), 1, true}};
    r.tokens = 10;
    r.queue = queue;
    r.home_hold = std::chrono::milliseconds(150);
    return r;
  };
  std::vector<outcome> results;
  std::vector<int> order;
  spawn(io, b, conversation(), results, order, 0);  // home is free: it takes it
  run(io, 20ms);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(std::get<admitted>(results[0]).index, 0u);
  // Home full, other free: it waits for home, which frees within the hold.
  spawn(io, b, conversation(), results, order, 1);
  run(io, 50ms);
  EXPECT_EQ(results.size(), 1u);
  EXPECT_EQ(b.load_of("other").streams.load(), 0);
  std::get<admitted>(results[0]).held.give_back();
  run(io, 20ms);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(std::get<admitted>(results[1]).index, 0u);
  // Home full again for longer than the hold: the other replica then.
  spawn(io, b, conversation(), results, order, 2);
  run(io, 100ms);
  EXPECT_EQ(results.size(), 2u);
  run(io, 150ms);
  ASSERT_EQ(results.size(), 3u);
  auto& elsewhere = std::get<admitted>(results[2]);
  EXPECT_EQ(elsewhere.index, 1u);
  EXPECT_GE(elsewhere.waited.count(), 140'000);
  EXPECT_NE(b.prometheus().find("tokengate_admission_queue_length{route=\"r\"} 0"),
            std::string::npos);
}

TEST(EngineGauges, ReadsEachEnginesNames) {
  auto vllm = read_engine_gauges(
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{model_name=\"a\"} 3.0\n"
      "vllm:num_requests_running{model_name=\"b\"} 1.0\n"
      "vllm:num_requests_waiting{model_name=\"a\"} 2.0\n"
      "vllm:kv_cache_usage_perc{model_name=\"a\"} 0.5\n");
  ASSERT_TRUE(vllm);
  EXPECT_EQ(vllm->running, 4);
  EXPECT_EQ(vllm->waiting, 2);
  EXPECT_EQ(vllm->kv_usage, 0.5);
  auto llama = read_engine_gauges(
      "llamacpp:requests_processing 4\nllamacpp:requests_deferred 7\n"
      "llamacpp:kv_cache_usage_ratio 0.25\n");
  ASSERT_TRUE(llama);
  EXPECT_EQ(llama->running, 4);
  EXPECT_EQ(llama->waiting, 7);
  auto tgi = read_engine_gauges("tgi_batch_current_size 8\ntgi_queue_size 1\n");
  ASSERT_TRUE(tgi);
  EXPECT_EQ(tgi->running, 8);
  EXPECT_FALSE(read_engine_gauges("process_cpu_seconds_total 12\n"));
  // A longer name that starts like a known one is another metric.
  EXPECT_FALSE(read_engine_gauges("vllm:num_requests_running_total 5\n"));
}

TEST(EngineGauges, ReadsTheCacheSizeAnEnginePublishes) {
  auto vllm = read_engine_gauges(
      "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",num_cpu_blocks=\"0\","
      "num_gpu_blocks=\"2048\",prefix_caching=\"True\"} 1.0\n"
      "vllm:num_requests_running{model_name=\"a\"} 0\n");
  ASSERT_TRUE(vllm);
  EXPECT_EQ(vllm->kv_tokens, 32768);
  auto sglang =
      read_engine_gauges("sglang:num_running_reqs 1\nsglang:max_total_num_tokens 500000\n");
  ASSERT_TRUE(sglang);
  EXPECT_EQ(sglang->kv_tokens, 500000);
  // Without both labels it says nothing.
  auto partial = read_engine_gauges(
      "vllm:cache_config_info{num_gpu_blocks=\"2048\"} 1.0\nvllm:num_requests_running 0\n");
  ASSERT_TRUE(partial);
  EXPECT_FALSE(partial->kv_tokens);
  EXPECT_FALSE(read_engine_gauges("vllm:num_requests_running 0\n")->kv_tokens);
}

}  // namespace
}  // namespace tokengate::fleet
