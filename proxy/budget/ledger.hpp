#pragma once
// Where budgets are counted: this process (local_ledger) or a Redis that
// every instance shares (redis_ledger). Both count the same way: fixed
// windows aligned to UTC (the minute, the day, the calendar month), each
// counter a number under "PREFIX:SCOPE:KIND:WINDOW_START_MS"; a
// concurrency limit is the set of reservations in flight. A reservation
// is all or nothing: every counter of the demand fits, and is raised by
// its amount, or none is.
#include <cstdint>
#include <string>
#include <vector>

#include "budget/demand.hpp"

namespace tokengate::budget {

struct window {
  std::int64_t start_ms = 0, end_ms = 0;
};
// The window of `kind` that holds `now_ms` (Unix milliseconds); a
// concurrency limit has none ({0, 0}).
window window_of(limit_kind kind, std::int64_t now_ms);

struct counter_state {
  long long used = 0;         // after this reservation (at a refusal: before it)
  std::int64_t reset_ms = 0;  // until the window ends; 0 for concurrency
};

struct reservation {
  bool admitted = false;
  std::size_t refused_at = 0;         // the counter that did not fit, when refused
  std::vector<counter_state> states;  // one per counter of the demand
  std::vector<std::string> keys;      // where each counter is stored (for settle)
  std::string id;                     // this reservation's slot in concurrency sets
  std::vector<long long> leased;      // granted beyond the amounts (Redis only)
  // Admitted by this process while the shared store did not answer: what
  // it counts is carried to the store when the store answers again.
  bool to_carry = false;
};

// Random, 128 bits as hex: a reservation's id.
std::string new_reservation_id();

// The difference settle() makes to each counter of `d`: the real usage in
// place of the estimate (requests and concurrency stay as reserved; a
// concurrency slot is given back separately).
std::vector<long long> settle_deltas(const demand& d, const usage& real);
// The difference that gives a reservation back whole, the request's count
// included: for a request refused after it reserved (by the fleet), which
// used nothing.
std::vector<long long> give_back_deltas(const demand& d);

}  // namespace tokengate::budget
