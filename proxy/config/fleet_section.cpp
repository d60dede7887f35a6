#include "config/fleet_section.hpp"

#include <algorithm>

namespace tokengate::config {
namespace {

// A path on the upstream's host: "/health", "/v1/models".
std::string host_path(const reader& r, const char* key, std::string fallback) {
  auto path = r.text(key, std::move(fallback));
  if (path.empty() || path.front() != '/' || path.find_first_of(" \r\n\t") != std::string::npos)
    r.fail_at(r.node()[key], std::string("'") + key + "' must be a path starting with /");
  return path;
}

duration positive_time(const reader& r, const char* key, duration fallback) {
  auto d = r.time(key, fallback);
  if (d.count() <= 0) r.fail_at(r.node()[key], std::string("'") + key + "' must be more than 0");
  return d;
}

}  // namespace

upstream_capacity read_capacity(const reader& r) {
  r.only_keys({"max_streams", "max_context_tokens", "kv_tokens", "max_prefill_tokens"});
  upstream_capacity c;  // (0 is refused: an engine with no slot holds nothing)
  c.max_streams = r.integer<int>("max_streams", 0, 1, 1'000'000);
  c.max_context_tokens = r.integer<long long>("max_context_tokens", 0, 1, 100'000'000);
  c.kv_tokens = r.integer<long long>("kv_tokens", 0, 1, 1'000'000'000);
  c.max_prefill_tokens = r.integer<long long>("max_prefill_tokens", 0, 1, 100'000'000);
  return c;
}

health_check_settings read_health_check(const reader& r) {
  r.only_keys({"path", "interval", "timeout", "unhealthy_after", "healthy_after"});
  health_check_settings h;
  h.path = host_path(r, "path", h.path);
  h.interval = positive_time(r, "interval", h.interval);
  h.timeout = positive_time(r, "timeout", h.timeout);
  h.unhealthy_after = r.integer<int>("unhealthy_after", h.unhealthy_after, 1, 100);
  h.healthy_after = r.integer<int>("healthy_after", h.healthy_after, 1, 100);
  if (h.timeout > h.interval)
    r.fail_at(r.node()["timeout"], "'timeout' must not be longer than 'interval'");
  return h;
}

engine_metrics_settings read_engine_metrics(const reader& r) {
  r.only_keys({"path", "interval"});
  engine_metrics_settings m;
  m.path = host_path(r, "path", m.path);
  m.interval = positive_time(r, "interval", m.interval);
  return m;
}

void read_route_fleet(const reader& r, route& rt) {
  auto balance = r.text("balance", "least_loaded");
  if (balance == "least_loaded")
    rt.balance = balance_mode::least_loaded;
  else if (balance == "weighted_random")
    rt.balance = balance_mode::weighted_random;
  else if (balance == "fastest")
    rt.balance = balance_mode::fastest;
  else
    r.fail_at(r.node()["balance"], "balance must be least_loaded, weighted_random or fastest");
  if (r.has("affinity")) {
    auto a = r.child("affinity");
    a.only_keys({"prefix_bytes", "max_load_ratio", "hold"});
    affinity_settings s;
    s.prefix_bytes = a.integer<std::size_t>("prefix_bytes", s.prefix_bytes, 64, 1 << 20);
    s.max_load_ratio = a.number("max_load_ratio", s.max_load_ratio, 1.0, 100.0);
    s.hold = a.time("hold", s.hold);
    rt.affinity = s;
  }
  if (r.has("queue")) {
    auto q = r.child("queue");
    q.only_keys({"max_waiting", "timeout"});
    queue_settings s;
    s.max_waiting = q.integer<std::size_t>("max_waiting", s.max_waiting, 1, 1'000'000);
    if (!q.has("timeout"))
      q.fail("route '" + rt.name + "': a queue needs a 'timeout' (how long a request may wait)");
    s.timeout = positive_time(q, "timeout", s.timeout);
    rt.queue = s;
  }
}

int read_priority(const reader& r) {
  auto p = r.text("priority", "normal");
  if (p == "high") return 0;
  if (p == "normal") return 1;
  if (p == "low") return 2;
  r.fail_at(r.node()["priority"], "priority must be high, normal or low");
}

void check_fleet(const reader& root, config& c) {
  const auto& routes = root.node()["routes"];
  for (std::size_t i = 0; i < c.routes.size(); ++i) {
    const auto& rt = c.routes[i];
    if (rt.affinity && rt.balance == balance_mode::fastest)
      c.warnings.push_back(root.said_at(
          routes[i]["affinity"],
          "route '" + rt.name +
              "': affinity does nothing under balance: fastest, which replaces it: the replica "
              "holding the most of the prompt's blocks is preferred (not a hash of the "
              "conversation), a full one is waited for as long as its wait is predicted "
              "(not `hold`), and the prediction weighs its load (not `max_load_ratio`)"));
    if (!rt.queue) continue;
    bool bounded = std::any_of(rt.targets.begin(), rt.targets.end(), [&](const auto& t) {
      return c.upstreams.at(t.upstream).capacity.bounds_admission();
    });
    if (!bounded)
      root.fail_at(routes[i]["queue"],
                   "route '" + rt.name +
                       "' has a queue but none of its targets declares capacity.max_streams "
                       "or capacity.max_prefill_tokens: nothing would ever wait");
  }
}

}  // namespace tokengate::config
