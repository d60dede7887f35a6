#pragma once
// The slowest requests of the last five minutes, for the status page: the
// ten whose first token took longest (a request without one ranks by its
// whole duration). One per worker, written by its thread as each request
// ends and read by the admin listener once a second; a request faster than
// every one kept, while none of them has aged out, passes without the lock.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "http/request_context.hpp"

namespace tokengate {

struct slow_request {
  std::int64_t rank_us = 0;      // the TTFT, else the duration
  std::int64_t ttft_us = -1;     // -1: no token reached the client
  std::int64_t duration_us = 0;  // request read to its last byte
  unsigned status = 0;
  std::string route, model, upstream, request_id;
  std::string trace_id;  // hex; empty when the trace was not exported
  std::int64_t finished_unix_ms = 0;
  clock::time_point finished;
};

class slow_requests {
 public:
  static constexpr std::size_t kept = 10;
  static constexpr std::chrono::minutes window{5};

  void offer(const request_context& ctx);
  // Those finished within the window before `now`, appended to `out`.
  void collect(std::vector<slow_request>& out, clock::time_point now) const;

 private:
  void drop_expired(clock::time_point now);  // (under mutex_)
  void set_fast_path();                      // (the same)

  mutable std::mutex mutex_;
  std::vector<slow_request> list_;
  // The fast path: below this rank, before that time (steady nanoseconds,
  // when the first kept one ages out), a request cannot enter the list.
  std::atomic<std::int64_t> floor_us_{0};
  std::atomic<std::int64_t> first_expiry_ns_{0};
};

// The slowest `count` of `all`, slowest first.
std::vector<slow_request> slowest_of(std::vector<slow_request> all, std::size_t count);

}  // namespace tokengate
