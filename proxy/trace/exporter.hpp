#pragma once
// The OTLP/HTTP exporter: spans are handed over at a request's end (a
// lock, a move into a bounded queue: nothing else on the request's path)
// and sent in batches from a thread of its own, as JSON POSTs to the
// collector. A full queue drops the new spans and counts them; a failed
// export is retried with backoff, then dropped and counted; a dead
// collector costs the requests nothing. drain() sends what is queued
// before the process exits.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "trace/span.hpp"

namespace tokengate::trace {

class exporter {
 public:
  explicit exporter(config::tracing_settings settings);
  ~exporter();
  exporter(const exporter&) = delete;
  exporter& operator=(const exporter&) = delete;

  // From any thread.
  void submit(std::vector<span> spans);
  // Sends what is queued (within `within`), then stops the thread.
  void drain(std::chrono::milliseconds within);

  std::uint64_t exported() const { return exported_; }
  std::uint64_t dropped() const { return dropped_; }
  std::uint64_t failures() const { return failures_; }
  std::string prometheus() const;

 private:
  void run();
  std::vector<span> take_batch();
  bool send_with_retries(const std::string& body, std::chrono::steady_clock::time_point give_up);
  std::chrono::steady_clock::time_point sooner_if_draining(
      std::chrono::steady_clock::time_point give_up);

  struct connection;  // the HTTP side (exporter.cpp)

  const config::tracing_settings settings_;
  const std::vector<std::pair<std::string, std::string>> resource_;
  std::unique_ptr<connection> http_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<span> queue_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point drain_deadline_;
  std::atomic<std::uint64_t> exported_{0}, dropped_{0}, failures_{0};
  std::thread thread_;
};

}  // namespace tokengate::trace
