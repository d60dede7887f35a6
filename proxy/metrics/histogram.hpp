#pragma once
// Two histograms, both with a single writer (the worker thread that owns
// them) and any number of readers (the admin endpoint): a record is a few
// relaxed loads and stores, no lock, no allocation.
//
// loglinear_histogram: values in microseconds, exact below 128 µs, then 64
//   buckets per power of two, so a quantile read at a bucket's midpoint is
//   within 0.8 % of the true value. Used for /stats percentiles.
// fixed_histogram: Prometheus buckets with fixed upper bounds in seconds.
#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

namespace tokengate::metrics {

// Single-writer relaxed counter.
template <typename T>
inline void bump(std::atomic<T>& a, T by = 1) {
  a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

class loglinear_histogram {
 public:
  static constexpr int exact_below = 128;
  static constexpr int sub_buckets = 64;
  static constexpr int max_shift = 34;  // up to 2^41 µs (about 25 days)
  static constexpr std::size_t bucket_count = exact_below + max_shift * sub_buckets;

  void record(std::uint64_t micros);
  void clear();

  static std::size_t index_of(std::uint64_t micros);
  static double midpoint_of(std::size_t index);  // µs

  std::uint64_t count(std::size_t index) const {
    return counts_[index].load(std::memory_order_relaxed);
  }
  std::uint64_t total() const { return total_.load(std::memory_order_relaxed); }
  std::uint64_t max() const { return max_.load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<std::uint32_t>, bucket_count> counts_{};
  std::atomic<std::uint64_t> total_{0};
  std::atomic<std::uint64_t> max_{0};
};

// Several histograms (shards, time slots) merged for reading.
class merged_histogram {
 public:
  merged_histogram() : counts_(loglinear_histogram::bucket_count, 0) {}
  void add(const loglinear_histogram& h);
  std::uint64_t total() const { return total_; }
  std::uint64_t max() const { return max_; }
  // The q-quantile (0 < q <= 1) in µs; 0 when empty.
  double quantile(double q) const;

 private:
  std::vector<std::uint64_t> counts_;
  std::uint64_t total_ = 0;
  std::uint64_t max_ = 0;
};

class fixed_histogram {
 public:
  static constexpr std::size_t max_bounds = 24;
  explicit fixed_histogram(std::span<const double> bounds_seconds);

  void record_micros(std::uint64_t micros);
  std::span<const double> bounds() const { return bounds_; }
  std::uint64_t bucket(std::size_t i) const {
    return counts_[i].load(std::memory_order_relaxed);
  }  // not cumulative
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  std::uint64_t sum_micros() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::span<const double> bounds_;
  // The bounds in whole microseconds (all of them are), so that a record
  // compares integers: converting each value to seconds and searching
  // doubles was half the accounting's cost per token (callgrind).
  std::array<std::uint64_t, max_bounds> bounds_micros_{};
  std::array<std::atomic<std::uint64_t>, max_bounds + 1> counts_{};  // the last one is +Inf
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_{0};
};

// Bucket bounds, in seconds. TTFT follows the OpenTelemetry GenAI advice
// (1 ms … 10 s) extended to minutes for long prompts, as vLLM does.
extern const std::array<double, 22> ttft_bounds;
extern const std::array<double, 16> inter_token_bounds;
extern const std::array<double, 17> duration_bounds;
// What the proxy itself adds to an event: 50 µs to a second.
extern const std::array<double, 14> relay_delay_bounds;

}  // namespace tokengate::metrics
