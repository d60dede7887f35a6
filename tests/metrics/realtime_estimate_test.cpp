// The real-time estimate against the real-time clock itself.
#include "metrics/realtime_estimate.hpp"

#include <gtest/gtest.h>

namespace tokengate::metrics {
namespace {

using namespace std::chrono_literals;

std::int64_t system_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(RealtimeEstimate, AgreesWithTheRealTimeClock) {
  realtime_estimate estimate;
  auto before = system_ns();
  auto estimated = estimate.real_ns_at(std::chrono::steady_clock::now());
  auto after = system_ns();
  // Read between two readings of the real clock, give or take a millisecond.
  EXPECT_GE(estimated, before - 1'000'000);
  EXPECT_LE(estimated, after + 1'000'000);
}

TEST(RealtimeEstimate, FollowsTheSteadyClockBetweenAndAcrossRefreshes) {
  realtime_estimate estimate;
  auto start = std::chrono::steady_clock::now();
  auto at_start = estimate.real_ns_at(start);
  // Within one refresh period: exactly the steady clock's step.
  EXPECT_EQ(estimate.real_ns_at(start + 40ms) - at_start, 40'000'000);
  // Past it (the offset is read again from both clocks): the same step,
  // give or take the clocks' drift since the first reading.
  auto later = start + realtime_estimate::refresh_every + 20ms;
  auto step = std::chrono::duration_cast<std::chrono::nanoseconds>(later - start).count();
  EXPECT_NEAR(static_cast<double>(estimate.real_ns_at(later) - at_start), static_cast<double>(step),
              1e6);
  // And still the real-time clock.
  EXPECT_NEAR(static_cast<double>(estimate.real_ns_at(std::chrono::steady_clock::now())),
              static_cast<double>(system_ns()), 1e6);
}

}  // namespace
}  // namespace tokengate::metrics
