#include "budget/lease_book.hpp"

#include <algorithm>

namespace tokengate::budget {

std::string lease_book::name_of(const counter& c) {
  return c.scope + ':' + std::string(kind_name(c.kind));
}

std::vector<long long> lease_book::wishes(const demand& d) {
  std::vector<long long> out;
  for (const auto& c : d.counters)
    out.push_back(c.kind == limit_kind::concurrent_streams
                      ? 0
                      : std::max(0LL, std::min(64 * c.amount, c.limit / 8)));
  return out;
}

lease_book::taken lease_book::take(const demand& d, steady::time_point now) {
  std::lock_guard lock(mutex_);
  taken t;
  t.whole = true;
  std::vector<lease*> found;
  for (const auto& c : d.counters) {
    lease* l = nullptr;
    if (auto at = leases_.find(name_of(c)); at != leases_.end() && at->second.ends > now &&
                                            at->second.limit == c.limit &&
                                            c.kind != limit_kind::concurrent_streams)
      l = &at->second;
    const long long portion = l ? std::min(l->left, c.amount) : 0;
    if (l) l->left -= portion;
    t.portions.push_back(portion);
    found.push_back(l);
    t.whole = t.whole && l && portion == c.amount;
  }
  if (!t.whole) return t;
  auto& r = t.covered;
  r.admitted = true;
  r.id = new_reservation_id();
  for (auto* l : found) {
    auto reset = std::chrono::duration_cast<std::chrono::milliseconds>(l->ends - now).count();
    // Used by requests, as far as this instance knows: what Redis counted
    // at the grant, less what this lease still holds.
    r.states.push_back({l->used - l->left, reset});
    r.keys.push_back(l->key);
    r.leased.push_back(0);
  }
  return t;
}

void lease_book::give_back(const demand& d, const std::vector<long long>& portions) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < d.counters.size() && i < portions.size(); ++i)
    if (auto l = leases_.find(name_of(d.counters[i])); l != leases_.end())
      l->second.left += portions[i];
}

void lease_book::grant(const demand& d, const reservation& r, steady::time_point now) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < d.counters.size() && i < r.leased.size(); ++i) {
    const auto& c = d.counters[i];
    if (c.kind == limit_kind::concurrent_streams) continue;
    auto& l = leases_[name_of(c)];
    if (l.key != r.keys[i] || l.ends <= now) {  // a new window: what was left is gone
      l.left = 0;
      l.key = r.keys[i];
    }
    l.left += r.leased[i];
    l.used = r.states[i].used;
    l.limit = c.limit;
    l.ends = now + std::chrono::milliseconds(r.states[i].reset_ms);
  }
}

bool lease_book::wants_top_up(const demand& d) {
  std::lock_guard lock(mutex_);
  bool wanted = false;
  auto wish = wishes(d);
  for (std::size_t i = 0; i < d.counters.size(); ++i) {
    if (!wish[i]) continue;
    auto& l = leases_[name_of(d.counters[i])];
    if (l.topping_up) return false;
    wanted = wanted || l.left < wish[i] / 2;
  }
  if (!wanted) return false;
  for (std::size_t i = 0; i < d.counters.size(); ++i)
    if (wish[i]) leases_[name_of(d.counters[i])].topping_up = true;
  return true;
}

void lease_book::topped_up(const demand& d) {
  std::lock_guard lock(mutex_);
  for (const auto& c : d.counters)
    if (auto l = leases_.find(name_of(c)); l != leases_.end()) l->second.topping_up = false;
}

}  // namespace tokengate::budget
