#pragma once
// The real-time clock read through the steady one.
//
// A kernel arrival stamp (SO_TIMESTAMPNS) is real time, while the relay
// reads the steady clock once per upstream read for its own timing. Reading
// the real-time clock as well, to turn the stamp into a relay delay, was a
// second clock read per event: half of the proxy's clock_gettime samples
// (perf, 64 fast streams). Here real time is the steady time plus an offset
// taken from both clocks at most every 100 ms. NTP slews the real-time
// clock by at most 500 ppm, so between two readings the estimate drifts by
// under 50 µs, the relay delay histogram's smallest bucket; a step of the
// clock (settimeofday) is picked up within 100 ms.
//
// One per worker thread: not thread-safe, and it needs not be.
#include <chrono>
#include <cstdint>

namespace tokengate::metrics {

class realtime_estimate {
 public:
  using steady = std::chrono::steady_clock;
  static constexpr auto refresh_every = std::chrono::milliseconds(100);

  // Real time, nanoseconds since the Unix epoch, at steady time `now`
  // (a recent reading of the steady clock).
  std::int64_t real_ns_at(steady::time_point now) {
    if (now >= next_refresh_) refresh();
    return ns(now.time_since_epoch()) + offset_ns_;
  }

 private:
  template <typename Duration>
  static std::int64_t ns(Duration d) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  }
  void refresh() {
    auto steady_now = steady::now();
    offset_ns_ =
        ns(std::chrono::system_clock::now().time_since_epoch()) - ns(steady_now.time_since_epoch());
    next_refresh_ = steady_now + refresh_every;
  }

  std::int64_t offset_ns_ = 0;
  steady::time_point next_refresh_{};  // (the epoch: the first reading refreshes)
};

}  // namespace tokengate::metrics
