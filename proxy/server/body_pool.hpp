#pragma once
// Buffers of long request bodies, kept by a worker for the requests after.
//
// A long prompt is read into a buffer of its size, and the read itself
// touches each of its pages first: taken fresh from the system, every 4 KiB
// is a page fault (about 10 us each on the virtual machines we measure on,
// where 256 MB touched afresh take 0.7 s). The heap gives freed pages back
// a second after (allocator.hpp), so a load whose bursts of long prompts
// came a few seconds apart faulted its buffers in again at every burst:
// 63 prompts of 200 KB and one of 4 MB, 2,000 to 6,000 faults, 20 to 60 ms
// on the worker's one thread with the burst's requests waiting behind
// them (scenario 6's TTFT p99; docs/performance.md, "Long bodies' buffers kept warm").
// Kept here, a buffer stays resident while it waits for the next body.
//
// Bounded: at most max_bytes of buffers, each freed once it has waited
// kept_for without being taken. Shorter bodies are not kept: they come
// from the heap's small pages, which stay in use and resident anyway.
// One per worker, used on its thread only.
#include <chrono>
#include <cstddef>
#include <map>

#include "http/client_request.hpp"
#include "metrics/counters.hpp"

namespace tokengate {

class body_pool {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::size_t kept_from = 16 * 1024;
  static constexpr std::size_t default_max_bytes = 32 * 1024 * 1024;
  static constexpr clock::duration default_kept_for = std::chrono::seconds(10);

  explicit body_pool(std::size_t max_bytes = default_max_bytes,
                     clock::duration kept_for = default_kept_for)
      : max_bytes_(max_bytes), kept_for_(kept_for) {}

  // A buffer of `length` bytes, their values unset: the smallest kept one
  // that holds them, else a new one.
  body_bytes take(std::size_t length);

  // Keeps `body`'s memory for a later take when it is long enough and the
  // pool has room; leaves it to its owner to free otherwise. (The clock is
  // read only for a buffer long enough to keep: most requests' are not.)
  void give_back(body_bytes&& body) {
    if (body.capacity() >= kept_from) give_back(std::move(body), clock::now());
  }
  void give_back(body_bytes&& body, clock::time_point now);

  // Frees the buffers that have waited kept_for or longer.
  void release_unused(clock::time_point now = clock::now());

  // Reports kept_bytes() in `gauge` from now on (a worker's metrics).
  void report_kept_bytes_to(metrics::counter& gauge) {
    gauge_ = &gauge;
    gauge_->add(kept_bytes_);
  }

  std::size_t kept_bytes() const { return kept_bytes_; }
  std::size_t kept_buffers() const { return kept_.size(); }

 private:
  struct kept_buffer {
    body_bytes bytes;
    clock::time_point since;
  };
  std::size_t max_bytes_;
  clock::duration kept_for_;
  std::multimap<std::size_t, kept_buffer> kept_;  // by capacity
  std::size_t kept_bytes_ = 0;
  metrics::counter* gauge_ = nullptr;

  void kept_bytes_add(std::size_t n);
  void kept_bytes_sub(std::size_t n);
};

// Gives a request's body back to the pool however the request ends.
class body_given_back {
 public:
  body_given_back(body_pool& pool, body_bytes& body) : pool_(pool), body_(body) {}
  body_given_back(const body_given_back&) = delete;
  body_given_back& operator=(const body_given_back&) = delete;
  ~body_given_back() { pool_.give_back(std::move(body_)); }

 private:
  body_pool& pool_;
  body_bytes& body_;
};

}  // namespace tokengate
