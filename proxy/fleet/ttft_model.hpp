#pragma once
// One replica's time to first token, learned from its own answers:
//
//   predicted = wait for a slot + base + prefill tokens × per token
//
// where the prefill tokens are those of the prompt its cache is not
// predicted to hold plus those of the requests still in prefill there.
// `base` and `per token` (its prefill rate) come from the requests that
// found a slot free, by least squares over their prefill tokens and
// observed TTFT, the old ones weighing less and less (each new one counts
// for 5 %); the wait is the requests ahead of this one divided by the rate
// at which the replica's requests have been ending. Until it has seen
// enough, the prior: 50 ms, 5,000 prompt tokens a second, a slot a second.
#include <chrono>
#include <mutex>

namespace tokengate::fleet {

class ttft_model {
 public:
  using clock = std::chrono::steady_clock;

  // A request sent while the replica had a slot free: the prompt tokens
  // it was to prefill (its own uncached, and those in prefill before it),
  // and the seconds to the first token.
  void observe_prefill(double prefill_tokens, double seconds);
  // A request there ended while every slot was taken: a slot came free
  // for a waiting one (the rate a queue moves at; an idle replica's gaps
  // say nothing of it).
  void observe_end(clock::time_point at);
  // Seconds, for `prefill_tokens` behind `ahead` requests waiting for a
  // slot there.
  double predict(double prefill_tokens, int ahead) const;
  // Its first part: the wait for a slot behind `ahead` requests.
  double wait_seconds(int ahead) const;

  double prefill_tokens_per_second() const;
  double slots_per_second() const;
  double base_seconds() const;

 private:
  struct fit {
    double base, per_token;
  };
  fit line() const;  // (under the lock)
  double waited(int ahead) const { return ahead > 0 ? ahead * gap_seconds_ : 0; }  // (the same)

  static constexpr double keep = 0.95;  // each observation's weight after the next
  mutable std::mutex lock_;
  // Exponentially weighted sums of 1, x, y, x², xy (x: tokens, y: seconds).
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  double gap_seconds_ = 1.0;  // between two ends, weighted likewise
  clock::time_point last_end_{};
};

}  // namespace tokengate::fleet
