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
  long long used = 0;
  if (auto found = amounts_.find(key); found != amounts_.end()) used = found->second.value;
  if (auto seen = seen_.find(key); seen != seen_.end()) used = std::max(used, seen->second.value);
  return {used, w.end_ms - now_ms};
}

// The most a counter may reach here. While the store is down, a window
// counter that the store reported at `seen` may grow by this process's
// share of what was left; nothing seen, that is the limit divided among
// the replicas.
long long local_ledger::limit_of(const counter& c, const std::string& key, int replicas) const {
  replicas = std::max(1, replicas);
  if (replicas == 1) return c.limit;
  long long seen = 0;
  if (c.kind != limit_kind::concurrent_streams)
    if (auto s = seen_.find(key); s != seen_.end()) seen = s->second.value;
  if (seen >= c.limit) return c.limit;
  return seen + std::max<long long>(1, (c.limit - seen) / replicas);
}

reservation local_ledger::reserve(const demand& d, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  return reserve_locked(d, now_ms, 1, false);
}

reservation local_ledger::reserve_while_store_down(const demand& d, std::int64_t now_ms,
                                                   int replicas) {
  std::lock_guard lock(mutex_);
  return reserve_locked(d, now_ms, replicas, true);
}

reservation local_ledger::reserve_locked(const demand& d, std::int64_t now_ms, int replicas,
                                         bool to_carry) {
  forget_expired(now_ms);
  reservation r;
  r.id = new_reservation_id();
  r.admitted = true;
  r.to_carry = to_carry;
  for (std::size_t i = 0; i < d.counters.size(); ++i) {
    const auto& c = d.counters[i];
    r.keys.emplace_back();
    r.states.push_back(state_of(c, now_ms, r.keys.back()));
    if (r.admitted && r.states.back().used + c.amount > limit_of(c, r.keys.back(), replicas)) {
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
      a.value = r.states[i].used + c.amount;  // (from the store's count, where that was higher)
      a.expires_ms = now_ms + r.states[i].reset_ms;
      if (to_carry) carry(r.keys[i], c.amount, a.expires_ms);
    }
    r.states[i].used += c.amount;
  }
  return r;
}

void local_ledger::settle(const demand& d, const reservation& r, const usage& real) {
  apply(d, r, settle_deltas(d, real));
}

void local_ledger::give_back(const demand& d, const reservation& r) {
  apply(d, r, give_back_deltas(d));
}

void local_ledger::apply(const demand& d, const reservation& r,
                         const std::vector<long long>& deltas) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < d.counters.size() && i < r.keys.size(); ++i) {
    if (d.counters[i].kind == limit_kind::concurrent_streams) {
      if (auto slots = slots_.find(r.keys[i]); slots != slots_.end()) slots->second.erase(r.id);
      continue;
    }
    // A window that ended meanwhile is gone: nothing to correct.
    auto a = amounts_.find(r.keys[i]);
    if (a == amounts_.end()) continue;
    a->second.value = std::max(0LL, a->second.value + deltas[i]);
    if (r.to_carry) carry(r.keys[i], deltas[i], a->second.expires_ms);
  }
}

std::vector<counter_state> local_ledger::peek(const demand& d, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  std::vector<counter_state> states;
  std::string key;
  for (const auto& c : d.counters) states.push_back(state_of(c, now_ms, key));
  return states;
}

void local_ledger::saw_in_store(const demand& d, const reservation& r, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < d.counters.size() && i < r.states.size(); ++i) {
    const auto& c = d.counters[i];
    if (c.kind == limit_kind::concurrent_streams) continue;
    auto w = window_of(c.kind, now_ms);
    auto& seen =
        seen_[c.scope + ':' + std::string(kind_name(c.kind)) + ':' + std::to_string(w.start_ms)];
    seen.value = r.states[i].used;  // (the store's latest word, up or down)
    seen.expires_ms = w.end_ms;
  }
}

void local_ledger::carry(const std::string& key, long long delta, std::int64_t window_end_ms) {
  auto& c = carry_[key];
  c.key = key;
  c.delta += delta;
  c.window_end_ms = window_end_ms;
  carry_pending_.store(true, std::memory_order_relaxed);
}

std::vector<local_ledger::carried> local_ledger::take_carry_over(std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  std::vector<carried> out;
  for (auto& [key, c] : carry_)
    if (c.window_end_ms > now_ms && c.delta != 0) out.push_back(std::move(c));
  carry_.clear();
  carry_pending_.store(false, std::memory_order_relaxed);
  return out;
}

void local_ledger::put_back(const std::vector<carried>& not_taken) {
  std::lock_guard lock(mutex_);
  for (const auto& c : not_taken) carry(c.key, c.delta, c.window_end_ms);
}

void local_ledger::forget_expired(std::int64_t now_ms) {
  if (now_ms < next_sweep_ms_) return;
  next_sweep_ms_ = now_ms + 10'000;
  auto expired = [&](const auto& entry) { return entry.second.expires_ms <= now_ms; };
  std::erase_if(amounts_, expired);
  std::erase_if(seen_, expired);
  std::erase_if(carry_, [&](const auto& entry) { return entry.second.window_end_ms <= now_ms; });
  for (auto& [scope, slots] : slots_)
    std::erase_if(slots, [&](const auto& slot) { return slot.second <= now_ms; });
  std::erase_if(slots_, [](const auto& entry) { return entry.second.empty(); });
}

}  // namespace tokengate::budget
