#include "metrics/histogram.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>

namespace tokengate::metrics {

const std::array<double, 22> ttft_bounds{0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                         0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                         20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::array<double, 16> inter_token_bounds{0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
                                                0.2,   0.3,   0.4,  0.5,   0.75, 1.0,   2.5, 10.0};
const std::array<double, 14> relay_delay_bounds{
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0};
const std::array<double, 17> duration_bounds{0.01,  0.02,  0.04,   0.08,   0.16,  0.32,
                                             0.64,  1.28,  2.56,   5.12,   10.24, 20.48,
                                             40.96, 81.92, 163.84, 327.68, 655.36};

std::size_t loglinear_histogram::index_of(std::uint64_t v) {
  if (v < exact_below) return static_cast<std::size_t>(v);
  int msb = 63 - std::countl_zero(v);  // >= 7
  int shift = msb - 6;                 // v >> shift lies in [64, 128)
  if (shift > max_shift) return bucket_count - 1;
  return exact_below + static_cast<std::size_t>(shift - 1) * sub_buckets +
         ((v >> shift) - sub_buckets);
}

double loglinear_histogram::midpoint_of(std::size_t index) {
  if (index < exact_below) return static_cast<double>(index);
  auto rel = index - exact_below;
  auto shift = static_cast<int>(rel / sub_buckets) + 1;
  auto low = static_cast<double>((rel % sub_buckets + sub_buckets) << shift);
  return low + static_cast<double>(1ULL << shift) / 2.0;
}

void loglinear_histogram::record(std::uint64_t micros) {
  bump(counts_[index_of(micros)], 1u);
  bump(total_, std::uint64_t{1});
  if (micros > max_.load(std::memory_order_relaxed)) max_.store(micros, std::memory_order_relaxed);
}

void loglinear_histogram::clear() {
  for (auto& c : counts_) c.store(0, std::memory_order_relaxed);
  total_.store(0, std::memory_order_relaxed);
  max_.store(0, std::memory_order_relaxed);
}

void merged_histogram::add(const loglinear_histogram& h) {
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += h.count(i);
  total_ += h.total();
  max_ = std::max(max_, h.max());
}

double merged_histogram::quantile(double q) const {
  std::uint64_t total = 0;
  for (auto c : counts_) total += c;  // recount: a concurrent writer may have moved on
  if (total == 0) return 0;
  auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total)));
  rank = std::clamp<std::uint64_t>(rank, 1, total);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank)
      return std::min(loglinear_histogram::midpoint_of(i),
                      static_cast<double>(std::max<std::uint64_t>(max_, 1)));
  }
  return static_cast<double>(max_);
}

fixed_histogram::fixed_histogram(std::span<const double> bounds_seconds) : bounds_(bounds_seconds) {
  assert(bounds_.size() <= max_bounds);
  for (std::size_t i = 0; i < bounds_.size(); ++i)
    bounds_micros_[i] = static_cast<std::uint64_t>(std::llround(bounds_[i] * 1e6));
}

void fixed_histogram::record_micros(std::uint64_t micros) {
  // le: value <= bound. Gaps and delays mostly fall in the first buckets,
  // so a walk from the smallest bound beats a binary search.
  std::size_t i = 0;
  while (i < bounds_.size() && micros > bounds_micros_[i]) ++i;
  bump(counts_[i], std::uint64_t{1});
  bump(count_, std::uint64_t{1});
  bump(sum_, micros);
}

}  // namespace tokengate::metrics
