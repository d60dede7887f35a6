#include "budget/board.hpp"

#include <algorithm>

namespace tokengate::budget {
namespace {

// `scope="key",name="team-a",limit="tokens_per_minute"` (names from the
// config; quotes and backslashes escaped all the same).
std::string labels(const std::string& scope, const std::string& kind) {
  auto colon = scope.find(':');
  std::string name;
  for (char ch : scope.substr(colon + 1)) {
    if (ch == '"' || ch == '\\') name += '\\';
    name += ch == '\n' ? ' ' : ch;
  }
  return "scope=\"" + scope.substr(0, colon) + "\",name=\"" + name + "\",limit=\"" + kind + "\"";
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

std::string board::prometheus(std::int64_t now_ms) const {
  std::string limit, used, remaining, refusals;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, g] : gauges_) {
      auto l = labels(id.first, id.second);
      long long now_used = g.reset_at_ms && now_ms >= g.reset_at_ms ? 0 : g.used;
      limit += "tokengate_budget_limit{" + l + "} " + std::to_string(g.limit) + "\n";
      used += "tokengate_budget_used{" + l + "} " + std::to_string(now_used) + "\n";
      remaining += "tokengate_budget_remaining{" + l + "} " +
                   std::to_string(std::max(0LL, g.limit - now_used)) + "\n";
      refusals += "tokengate_budget_refusals_total{" + l + "} " + std::to_string(g.refusals) + "\n";
    }
  }
  if (limit.empty()) return "";
  return "# HELP tokengate_budget_limit Each budget limit (USD limits in micro-dollars).\n"
         "# TYPE tokengate_budget_limit gauge\n" +
         limit +
         "# HELP tokengate_budget_used Used in the current window, as last read from the store.\n"
         "# TYPE tokengate_budget_used gauge\n" +
         used +
         "# HELP tokengate_budget_remaining Left in the current window.\n"
         "# TYPE tokengate_budget_remaining gauge\n" +
         remaining +
         "# HELP tokengate_budget_refusals_total Requests refused (429) by this limit.\n"
         "# TYPE tokengate_budget_refusals_total counter\n" +
         refusals;
}

}  // namespace tokengate::budget
