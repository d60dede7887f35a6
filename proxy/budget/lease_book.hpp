#pragma once
// What this process holds of the shared budgets beyond what its requests
// reserved: a lease per window counter, granted by the reserve script
// (budget/redis_scripts.hpp) and counted as used in Redis from then on.
// A request whose every counter fits in its leases is admitted here,
// without a round trip; the leases are topped up in the background when
// they run low. Nothing is ever admitted that Redis did not grant, so
// leases cannot overrun a budget; what a lease holds unused is what other
// instances cannot have until the window ends, so a lease is bounded: 64
// requests' worth (a burst of that many concurrent requests is admitted
// without a round trip), and at most an eighth of the limit.
// Concurrency limits are never leased: their slots are per request.
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "budget/ledger.hpp"

namespace tokengate::budget {

class lease_book {
 public:
  using steady = std::chrono::steady_clock;

  // What to ask for beyond each counter's amount (0 for a concurrency limit).
  static std::vector<long long> wishes(const demand& d);

  // Takes from each counter's lease what it holds of the counter's amount.
  // `whole`: every counter was covered (and none is a concurrency limit):
  // the request is admitted, as `covered` says. Otherwise `portions` is
  // what was taken, for the caller to ask Redis only for the rest, and to
  // give back if Redis does not grant it.
  struct taken {
    bool whole = false;
    std::vector<long long> portions;
    reservation covered;
  };
  taken take(const demand& d, steady::time_point now);
  void give_back(const demand& d, const std::vector<long long>& portions);
  // What a reply granted, for the counters of `d`.
  void grant(const demand& d, const reservation& r, steady::time_point now);
  // Whether some lease of `d` is under half its size (and no top-up is on
  // its way): the caller then sends one, and calls topped_up() when its
  // answer came.
  bool wants_top_up(const demand& d);
  void topped_up(const demand& d);

 private:
  struct lease {
    long long left = 0;
    long long used = 0;  // in Redis at the grant, this instance's takes since added
    long long limit = 0;
    steady::time_point ends;
    std::string key;  // the Redis counter it was granted from
    bool topping_up = false;
  };
  static std::string name_of(const counter& c);

  std::mutex mutex_;
  std::map<std::string, lease> leases_;
};

}  // namespace tokengate::budget
