#pragma once
// Admission by budget: reserve before the upstream is called, settle with
// the real usage after. `budgets` is the process's (the local ledger, the
// store's health, the metrics board); a `gate` is one worker's, with its
// own Redis connection when the config has `redis:`.
//
// With Redis, a request whose counters fit in this process's leases
// (budget/lease_book.hpp) is admitted at once; otherwise its reservation is
// one round trip (a Lua script that checks and reserves every counter at
// once, and grants leases) and waits at most redis.timeout. Settlements
// and lease top-ups are sent without waiting. Without an answer in time,
// on_store_failure decides: deny (503) or allow_local (this process's
// ledger, carrying on from the counts Redis last reported, with a share of
// what was left for each of redis.replicas instances; budget/local_ledger.hpp).
// What was counted locally is added to Redis before the next request that
// reaches it. A reservation whose answer comes after its request stopped
// waiting is given back.
#include <atomic>
#include <memory>
#include <optional>

#include "budget/answer.hpp"
#include "budget/board.hpp"
#include "budget/lease_book.hpp"
#include "budget/local_ledger.hpp"
#include "config/config.hpp"
#include "io/net.hpp"
#include "redis/client.hpp"
#include "redis/store_health.hpp"

namespace tokengate::budget {

class budgets {
 public:
  explicit budgets(std::optional<config::redis_settings> redis);
  const std::optional<config::redis_settings>& redis() const { return redis_; }
  local_ledger& local() { return local_; }
  lease_book& leases() { return leases_; }
  budget::board& board() { return board_; }
  redis::store_health* health() { return health_ ? &*health_ : nullptr; }
  // tokengate_budget_* (the board's, and the store's when there is one).
  std::string prometheus() const;

  std::atomic<std::uint64_t> local_fallbacks{0};  // counted here while the store was down
  std::atomic<std::uint64_t> store_denials{0};    // 503 while the store was down

 private:
  std::optional<config::redis_settings> redis_;
  local_ledger local_;
  lease_book leases_;
  budget::board board_;
  std::optional<redis::store_health> health_;
};

struct admission {
  enum class verdict { admitted, refused, store_unavailable };
  verdict outcome = verdict::admitted;
  std::shared_ptr<const demand> asked;
  reservation held;
  bool in_store = false;  // counted in Redis (else in this process)
  bool settled = false;
  header_list headers;  // x-ratelimit-*, for the answer whatever it is
};

class gate {
 public:
  gate(net::any_io_executor executor, budgets& shared);

  net::awaitable<admission> admit(demand d);
  // Once per admitted request, at its end.
  void settle(admission& a, const usage& real);
  // In place of settle, for an admitted request refused before any
  // upstream call (by the fleet): as if it had never been made.
  void give_back(admission& a);
  // GET /budgets: every key's and route's counters as the store has them
  // (while it does not answer: as this process counts them, "view": "local").
  net::awaitable<std::string> report_json(const config::config& cfg);

 private:
  net::awaitable<std::optional<redis::reply>> call(
      std::vector<std::string> args, std::chrono::milliseconds timeout,
      std::function<void(const redis::reply&)> if_late);
  net::awaitable<std::optional<reservation>> reserve_in_store(std::shared_ptr<const demand> d,
                                                              std::vector<long long> leases);
  void top_up_leases(const demand& d);
  void carry_over_to_store();
  admission decided(std::shared_ptr<const demand> d, reservation r, bool in_store);

  net::any_io_executor executor_;
  budgets& shared_;
  std::unique_ptr<redis::client> redis_;
};

}  // namespace tokengate::budget
