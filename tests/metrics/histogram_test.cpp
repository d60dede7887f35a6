// Percentiles against distributions whose quantiles are known exactly.
#include "metrics/histogram.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "metrics/latency.hpp"

namespace tokengate::metrics {
namespace {

double exact_quantile(std::vector<std::uint64_t> values, double q) {
  std::sort(values.begin(), values.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return static_cast<double>(values[std::max<std::size_t>(rank, 1) - 1]);
}

void expect_within_one_percent(const std::vector<std::uint64_t>& values) {
  auto h = std::make_unique<loglinear_histogram>();
  for (auto v : values) h->record(v);
  merged_histogram m;
  m.add(*h);
  EXPECT_EQ(m.total(), values.size());
  EXPECT_EQ(m.max(), *std::max_element(values.begin(), values.end()));
  for (double q : {0.5, 0.9, 0.95, 0.99, 0.999}) {
    auto truth = exact_quantile(values, q);
    EXPECT_NEAR(m.quantile(q), truth, truth * 0.01 + 0.5) << "q=" << q;
  }
}

TEST(LogLinearHistogram, UniformDistribution) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t i = 1; i <= 100000; ++i) v.push_back(i * 37);  // 37 µs … 3.7 s
  expect_within_one_percent(v);
}

TEST(LogLinearHistogram, ExponentialTail) {
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> d(1.0 / 50000);  // mean 50 ms: a long tail
  std::vector<std::uint64_t> v;
  for (int i = 0; i < 200000; ++i) v.push_back(static_cast<std::uint64_t>(d(rng)) + 1);
  expect_within_one_percent(v);
}

TEST(LogLinearHistogram, BimodalLatencies) {
  // 98 % fast (2 ms), 2 % stuck behind a long prefill (4 s): p99 must see the tail.
  std::vector<std::uint64_t> v(9800, 2000);
  v.insert(v.end(), 200, 4'000'000);
  expect_within_one_percent(v);
  auto h = std::make_unique<loglinear_histogram>();
  for (auto x : v) h->record(x);
  merged_histogram m;
  m.add(*h);
  EXPECT_NEAR(m.quantile(0.5), 2000, 20);
  EXPECT_NEAR(m.quantile(0.99), 4'000'000, 40'000);
}

TEST(LogLinearHistogram, IndexAndMidpointAgree) {
  for (std::uint64_t v : {0ULL, 1ULL, 127ULL, 128ULL, 129ULL, 1000ULL, 123456ULL, 1ULL << 40}) {
    auto i = loglinear_histogram::index_of(v);
    EXPECT_NEAR(loglinear_histogram::midpoint_of(i), static_cast<double>(v),
                static_cast<double>(v) * 0.008 + 0.5)
        << v;
  }
  EXPECT_EQ(loglinear_histogram::index_of(~0ULL), loglinear_histogram::bucket_count - 1);
}

TEST(FixedHistogram, BucketsAreUpperInclusive) {
  fixed_histogram h(ttft_bounds);
  h.record_micros(1000);             // exactly 1 ms → le="0.001"
  h.record_micros(1001);             // → le="0.005"
  h.record_micros(100'000'000'000);  // beyond the last bound → +Inf
  EXPECT_EQ(h.bucket(0), 1u);
  EXPECT_EQ(h.bucket(1), 1u);
  EXPECT_EQ(h.bucket(ttft_bounds.size()), 1u);
  EXPECT_EQ(h.count(), 3u);
  EXPECT_EQ(h.sum_micros(), 100'000'002'001u);
}

// Every value at and around every bound of every family lands in the
// bucket a search over the bounds in seconds picks (value <= bound).
TEST(FixedHistogram, EveryBoundIsExactInMicroseconds) {
  std::vector<std::span<const double>> families{ttft_bounds, inter_token_bounds, duration_bounds,
                                                relay_delay_bounds};
  for (auto bounds : families) {
    for (double bound : bounds) {
      auto at = static_cast<std::uint64_t>(std::llround(bound * 1e6));
      for (std::uint64_t micros = at - 1; micros <= at + 1; ++micros) {
        fixed_histogram h(bounds);
        h.record_micros(micros);
        auto expected = static_cast<std::size_t>(
            std::lower_bound(bounds.begin(), bounds.end(), static_cast<double>(micros) / 1e6) -
            bounds.begin());
        EXPECT_EQ(h.bucket(expected), 1u) << micros << " us against the bound " << bound;
      }
    }
  }
}

TEST(WindowedHistogram, OldSlotsLeaveTheWindows) {
  auto w = std::make_unique<windowed_histogram>();
  auto t0 = windowed_histogram::clock::time_point(std::chrono::seconds(3000));
  w->record(1000, t0);
  w->record(2000, t0 + std::chrono::seconds(200));
  merged_histogram minute, five, all;
  w->read(minute, five, all, t0 + std::chrono::seconds(200));
  EXPECT_EQ(minute.total(), 1u);
  EXPECT_EQ(five.total(), 2u);
  EXPECT_EQ(all.total(), 2u);
  merged_histogram minute2, five2, all2;
  w->read(minute2, five2, all2, t0 + std::chrono::seconds(600));
  EXPECT_EQ(minute2.total(), 0u);
  EXPECT_EQ(five2.total(), 0u);
  EXPECT_EQ(all2.total(), 2u);
}

}  // namespace
}  // namespace tokengate::metrics
