// The run-queue wait for /metrics: the schedstat line's field, and this
// process's own threads made to wait for one core.
#include "metrics/cpu_wait.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace tokengate::metrics {
namespace {

TEST(CpuWait, TheSecondFieldOfASchedstatLineIsTheWait) {
  EXPECT_EQ(schedstat_wait_ns("270309901 47737914 949"), 47737914u);
  EXPECT_EQ(schedstat_wait_ns("270309901 47737914 949\n"), 47737914u);
  EXPECT_EQ(schedstat_wait_ns("270309901"), std::nullopt);
  EXPECT_EQ(schedstat_wait_ns("270309901 47737914"), std::nullopt) << "the line has three fields";
  EXPECT_EQ(schedstat_wait_ns("270309901 x 949"), std::nullopt);
  EXPECT_EQ(schedstat_wait_ns(""), std::nullopt);
}

void pin_to(pthread_t thread, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ASSERT_EQ(pthread_setaffinity_np(thread, sizeof set, &set), 0);
}

void spin_until(std::chrono::steady_clock::time_point end) {
  while (std::chrono::steady_clock::now() < end) {
  }
}

// Two threads that never sleep, on one core for 300 ms: each waits while
// the other runs, about half the time, so together well over 50 ms.
TEST(CpuWait, ThreadsSharingOneCoreAreSeenWaiting) {
  auto before = read_cpu_wait_ns();
  if (!before) GTEST_SKIP() << "no schedstat in this kernel";
  cpu_set_t original;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof original, &original), 0);
  const int cpu = sched_getcpu();
  pin_to(pthread_self(), cpu);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  std::thread other([&] {
    pin_to(pthread_self(), cpu);
    spin_until(end);
  });
  spin_until(end);
  other.join();
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof original, &original), 0);
  auto after = read_cpu_wait_ns();
  ASSERT_TRUE(after);
  ASSERT_GE(*after, *before);
  // (The other thread has ended and its wait left the sum: this thread's
  // own is enough, about 150 ms.)
  EXPECT_GT(*after - *before, 50'000'000u);
}

TEST(CpuWait, RendersACounterInSecondsAndDeclaresItWhenUnknown) {
  auto text = render_cpu_wait_prometheus(1'500'000'000u);
  EXPECT_NE(text.find("# TYPE tokengate_cpu_wait_seconds_total counter\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\ntokengate_cpu_wait_seconds_total 1.500000\n"), std::string::npos) << text;
  auto unknown = render_cpu_wait_prometheus(std::nullopt);
  EXPECT_NE(unknown.find("# TYPE tokengate_cpu_wait_seconds_total counter"), std::string::npos);
  EXPECT_EQ(unknown.find("\ntokengate_cpu_wait_seconds_total "), std::string::npos) << unknown;
}

}  // namespace
}  // namespace tokengate::metrics
