#include "fleet/picker.hpp"

#include <algorithm>
#include <cmath>

namespace tokengate::fleet {
namespace {

bool full(const target_state& t) { return t.max_streams > 0 && t.busy >= t.max_streams; }

// In-flight tokens per unit of weight; a full target after every other.
double load_of(const target_state& t) {
  const double w = std::max(1u, t.target->weight);
  return (full(t) ? 1e18 : 0.0) + static_cast<double>(t.tokens) / w;
}

std::size_t draw_by_weight(std::span<const target_state> targets,
                           const std::vector<std::size_t>& among, std::mt19937_64& rng) {
  std::uint64_t total = 0;
  for (auto i : among) total += targets[i].target->weight;
  if (total == 0) return among.front();
  auto r = std::uniform_int_distribution<std::uint64_t>(0, total - 1)(rng);
  for (auto i : among) {
    if (r < targets[i].target->weight) return i;
    r -= targets[i].target->weight;
  }
  return among.back();
}

std::size_t least_loaded_of_two(std::span<const target_state> targets,
                                const std::vector<std::size_t>& among, std::mt19937_64& rng) {
  const auto a = draw_by_weight(targets, among, rng);
  if (among.size() == 1) return a;
  std::vector<std::size_t> others;
  for (auto i : among)
    if (i != a) others.push_back(i);
  const auto b = draw_by_weight(targets, others, rng);
  return load_of(targets[b]) < load_of(targets[a]) ? b : a;
}

// Weighted rendezvous hashing: the score -w / ln(u), u uniform in (0, 1)
// from the key and the target, ranks the targets the same on every
// instance, in proportion to their weights.
double rendezvous_score(std::uint64_t key, const target_state& t) {
  std::uint64_t h = (key ^ t.name_hash) * 0x9e3779b97f4a7c15ULL;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  const double u = (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;  // (0, 1)
  return -static_cast<double>(std::max(1u, t.target->weight)) / std::log(u);
}

// The conversation's target by rendezvous rank, the first whose streams
// stay within max_load_ratio of its weighted share; nullopt when none does.
std::optional<std::size_t> by_affinity(std::span<const target_state> targets,
                                       const std::vector<std::size_t>& healthy, std::uint64_t key,
                                       double max_load_ratio, bool wait_for_home, bool& spilled) {
  std::vector<std::pair<double, std::size_t>> ranked;
  long long busy = 0, weight = 0;
  bool any_free = false;
  for (auto i : healthy) {
    ranked.emplace_back(rendezvous_score(key, targets[i]), i);
    busy += targets[i].busy;
    weight += std::max(1u, targets[i].target->weight);
    any_free = any_free || !full(targets[i]);
  }
  std::sort(ranked.begin(), ranked.end(), std::greater<>());
  for (auto [score, i] : ranked) {
    const auto& t = targets[i];
    // Consistent hashing with bounded loads: at most ceil(ratio × share),
    // plus one stream of slack so that a lone conversation never leaves an
    // idle fleet's replica (the engines' own gauges lag behind).
    const double share = static_cast<double>(busy + 1) * std::max(1u, t.target->weight) /
                         static_cast<double>(weight);
    const auto allowed = static_cast<long long>(std::ceil(max_load_ratio * share)) + 1;
    const bool overloaded = t.busy + 1 > allowed;
    if ((full(t) && any_free && !wait_for_home) || overloaded) {
      spilled = true;
      continue;
    }
    return i;
  }
  return std::nullopt;
}

// Where a request may go first: the healthy targets with a weight. One
// of weight 0 is a fallback only, however idle it is (a loaded weighted
// target is still the one to ask); all of weight 0, the route's order.
std::vector<std::size_t> first_choices(std::span<const target_state> targets,
                                       const std::vector<std::size_t>& healthy) {
  std::vector<std::size_t> weighted;
  for (auto i : healthy)
    if (targets[i].target->weight > 0) weighted.push_back(i);
  return weighted.empty() ? std::vector<std::size_t>{healthy.front()} : weighted;
}

}  // namespace

pick pick_order(const config::route& route, std::span<const target_state> targets,
                std::optional<std::uint64_t> conversation, std::mt19937_64& rng,
                bool wait_for_home) {
  pick p;
  std::vector<std::size_t> healthy, ejected;
  for (std::size_t i = 0; i < targets.size(); ++i)
    (targets[i].healthy ? healthy : ejected).push_back(i);
  if (!healthy.empty() && route.balance == config::balance_mode::fastest) {
    // (Ties, e.g. an idle fleet that holds none of the prompt, go to any.)
    std::shuffle(healthy.begin(), healthy.end(), rng);
    std::stable_sort(healthy.begin(), healthy.end(), [&](auto a, auto b) {
      return targets[a].predicted_s < targets[b].predicted_s;
    });
    p.order = healthy;
  } else if (!healthy.empty()) {
    const auto choices = first_choices(targets, healthy);
    std::optional<std::size_t> first;
    if (route.affinity && conversation)
      first = by_affinity(targets, choices, *conversation, route.affinity->max_load_ratio,
                          wait_for_home, p.spilled);
    p.by_affinity = first.has_value();
    if (!first)
      first = route.balance == config::balance_mode::least_loaded
                  ? least_loaded_of_two(targets, choices, rng)
                  : draw_by_weight(targets, choices, rng);
    p.order.push_back(*first);
    std::vector<std::size_t> rest;
    for (auto i : healthy)
      if (i != *first) rest.push_back(i);
    // The weighted ones (least loaded first under least_loaded), then the
    // fallbacks.
    std::stable_sort(rest.begin(), rest.end(), [&](auto a, auto b) {
      const bool a_falls_back = targets[a].target->weight == 0;
      const bool b_falls_back = targets[b].target->weight == 0;
      if (a_falls_back != b_falls_back) return b_falls_back;
      return route.balance == config::balance_mode::least_loaded &&
             load_of(targets[a]) < load_of(targets[b]);
    });
    p.order.insert(p.order.end(), rest.begin(), rest.end());
  }
  p.order.insert(p.order.end(), ejected.begin(), ejected.end());
  return p;
}

}  // namespace tokengate::fleet
