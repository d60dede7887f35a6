#pragma once
// Whether the shared budget store answers, for the whole process: every
// worker's connection reports here, and a change is logged once (down,
// then up again), never once per request.
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokengate::redis {

class store_health {
 public:
  // `where` names the store in the log ("redis at 10.0.0.5:6379"): never
  // its password.
  // `user`, `while_down` and `when_back` word the log for what the store
  // serves (the budgets unless said otherwise).
  explicit store_health(std::string where, std::string user = "budgets",
                        std::string while_down = "on_store_failure applies until it does",
                        std::string when_back = "budgets are shared from now on")
      : where_(std::move(where)),
        user_(std::move(user)),
        while_down_(std::move(while_down)),
        when_back_(std::move(when_back)) {}

  // A connection failed, a reply broke the protocol, or a request's wait
  // ran out.
  void failed(std::string_view why);
  // A reply came.
  void answered();
  // A settlement the store did not take (logged once until one succeeds).
  void settle_failed(std::string_view why);
  void settled() {
    settlements_ok_.fetch_add(1, std::memory_order_relaxed);
    if (settle_failing_.load(std::memory_order_relaxed))
      settle_failing_.store(false, std::memory_order_relaxed);
  }

  bool up() const { return up_.load(std::memory_order_relaxed); }
  std::uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  std::uint64_t settlements_ok() const { return settlements_ok_.load(std::memory_order_relaxed); }
  std::uint64_t settlements_failed() const {
    return settlements_failed_.load(std::memory_order_relaxed);
  }
  const std::string& where() const { return where_; }

 private:
  std::string where_, user_, while_down_, when_back_;
  std::atomic<bool> up_{true};
  std::atomic<bool> settle_failing_{false};
  std::atomic<std::uint64_t> failures_{0};
  std::atomic<std::uint64_t> settlements_ok_{0};
  std::atomic<std::uint64_t> settlements_failed_{0};
};

}  // namespace tokengate::redis
