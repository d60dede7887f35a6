#include "budget/board.hpp"

#include <algorithm>
#include <string_view>
#include <vector>

#include "metrics/prometheus_text.hpp"

namespace tokengate::budget {
namespace {

// `scope="key",name="team-a",limit="tokens_per_minute"` (names from the
// config).
metrics::labels labels_of(std::string_view scope, std::string_view kind) {
  auto colon = scope.find(':');
  return {{"scope", scope.substr(0, colon)}, {"name", scope.substr(colon + 1)}, {"limit", kind}};
}

}  // namespace

void board::record(const demand& d, const reservation& r, std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < d.counters.size() && i < r.states.size(); ++i) {
    const auto& c = d.counters[i];
    auto& g = gauges_[{c.scope, std::string(kind_name(c.kind))}];
    g.limit = c.limit;
    g.used = r.states[i].used;
    g.reset_at_ms = c.kind == limit_kind::concurrent_streams ? 0 : now_ms + r.states[i].reset_ms;
    if (!r.admitted && i == r.refused_at) ++g.refusals;
  }
}

std::uint64_t board::refusals(const std::string& scope, std::string_view kind) const {
  std::lock_guard lock(mutex_);
  auto it = gauges_.find({scope, std::string(kind)});
  return it == gauges_.end() ? 0 : it->second.refusals;
}

std::string board::prometheus(std::int64_t now_ms) const {
  struct row {
    metrics::labels set;
    long long limit, used;
    std::uint64_t refusals;
  };
  std::vector<row> rows;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, g] : gauges_)
      rows.push_back({labels_of(id.first, id.second), g.limit,
                      g.reset_at_ms && now_ms >= g.reset_at_ms ? 0 : g.used, g.refusals});
  }
  if (rows.empty()) return "";
  metrics::prometheus_text out;
  using metrics::metric_type;
  out.family("tokengate_budget_limit", metric_type::gauge,
             "Each budget limit (USD limits in micro-dollars).");
  for (const auto& r : rows) out.sample(r.set, r.limit);
  out.family("tokengate_budget_used", metric_type::gauge,
             "Used in the current window, as last read from the store.");
  for (const auto& r : rows) out.sample(r.set, r.used);
  out.family("tokengate_budget_remaining", metric_type::gauge, "Left in the current window.");
  for (const auto& r : rows) out.sample(r.set, std::max(0LL, r.limit - r.used));
  out.family("tokengate_budget_refusals_total", metric_type::counter,
             "Requests refused (429) by this limit.");
  for (const auto& r : rows) out.sample(r.set, r.refusals);
  return out.take();
}

}  // namespace tokengate::budget
