#include "budget/local_ledger.hpp"

#include <algorithm>

namespace tokengate::budget {

counter_state local_ledger::state_of(const counter& c, std::int64_t now_ms, std::string& key) {
  key = c.scope + ':' + std::string(kind_name(c.kind));
  if (c.kind == limit_kind::concurrent_streams) {
    auto& slots = slots_[key];
    std::erase_if(slots, [&](const auto& slot) { return slot.second <= now_ms; });
    return {static_cast<long long>(slots.size()), 0};
  }
  auto w = window_of(c.kind, now_ms);
  key += ':' + std::to_string(w.start_ms);
  auto found = amounts_.find(key);
  return {found == amounts_.end() ? 0 : found->second.value, w.end_ms - now_ms};
}

reservation local_ledger::reserve(const demand& d, std::int64_t now_ms, int divisor) {
  std::lock_guard lock(mutex_);
  forget_expired(now_ms);
  reservation r;
  r.id = new_reservation_id();
  r.admitted = true;
  for (std::size_t i = 0; i < d.counters.size(); ++i) {
    const auto& c = d.counters[i];
    r.keys.emplace_back();
    r.states.push_back(state_of(c, now_ms, r.keys.back()));
    long long limit = std::max<long long>(1, c.limit / std::max(1, divisor));
    if (r.admitted && r.states.back().used + c.amount > limit) {
      r.admitted = false;
      r.refused_at = i;
    }
  }
  if (!r.admitted) return r;
  for (std::size_t i = 0; i < d.counters.size(); ++i) {
    const auto& c = d.counters[i];
    if (c.kind == limit_kind::concurrent_streams) {
      slots_[r.keys[i]][r.id] = now_ms + d.slot_ttl_ms;
    } else {
      auto& a = amounts_[r.keys[i]];
      a.value += c.amount;
      a.expires_ms = now_ms + r.states[i].reset_ms;
    }
    r.states[i].used += c.amount;
  }
  return r;
}

void local_ledger::settle(const demand& d, const reservation& r, const usage& real) {
  auto deltas = settle_deltas(d, real);
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < d.counters.size() && i < r.keys.size(); ++i) {
    if (d.counters[i].kind == limit_kind::concurrent_streams) {
      if (auto slots = slots_.find(r.keys[i]); slots != slots_.end()) slots->second.erase(r.id);
      continue;
    }
    // A window that ended meanwhile is gone: nothing to correct.
    if (auto a = amounts_.find(r.keys[i]); a != amounts_.end())
      a->second.value = std::max(0LL, a->second.value + deltas[i]);
  }
}

std::vector<counter_state> local_ledger::peek(const demand& d, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  std::vector<counter_state> states;
  std::string key;
  for (const auto& c : d.counters) states.push_back(state_of(c, now_ms, key));
  return states;
}

void local_ledger::forget_expired(std::int64_t now_ms) {
  if (now_ms < next_sweep_ms_) return;
  next_sweep_ms_ = now_ms + 10'000;
  std::erase_if(amounts_, [&](const auto& entry) { return entry.second.expires_ms <= now_ms; });
  for (auto& [scope, slots] : slots_)
    std::erase_if(slots, [&](const auto& slot) { return slot.second <= now_ms; });
  std::erase_if(slots_, [](const auto& entry) { return entry.second.empty(); });
}

}  // namespace tokengate::budget
