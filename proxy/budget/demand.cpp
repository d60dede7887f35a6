#include "budget/demand.hpp"

#include <algorithm>
#include <cmath>

#include "config/glob.hpp"
#include "routing/policy.hpp"

namespace tokengate::budget {
namespace {

const config::model_price* price_of(const config::config& cfg, std::string_view model) {
  if (auto exact = cfg.prices.find(std::string(model)); exact != cfg.prices.end())
    return &exact->second;
  for (const auto& [pattern, price] : cfg.prices)
    if (config::glob_match(pattern, model)) return &price;
  return nullptr;
}

void add_counters(demand& d, const std::string& scope, const config::budget_limits& b) {
  auto add = [&](limit_kind kind, long long limit) {
    d.counters.push_back({scope, kind, limit, amount_of(kind, d.estimate, d)});
  };
  if (b.requests_per_minute) add(limit_kind::requests_per_minute, *b.requests_per_minute);
  if (b.tokens_per_minute) add(limit_kind::tokens_per_minute, *b.tokens_per_minute);
  if (b.tokens_per_day) add(limit_kind::tokens_per_day, *b.tokens_per_day);
  if (b.concurrent_streams) add(limit_kind::concurrent_streams, *b.concurrent_streams);
  auto micro = [](double usd) { return std::llround(usd * micro_usd_per_usd); };
  if (b.usd_per_day) add(limit_kind::usd_per_day, micro(*b.usd_per_day));
  if (b.usd_per_month) add(limit_kind::usd_per_month, micro(*b.usd_per_month));
}

}  // namespace

std::string_view kind_name(limit_kind kind) {
  switch (kind) {
    case limit_kind::requests_per_minute:
      return "requests_per_minute";
    case limit_kind::tokens_per_minute:
      return "tokens_per_minute";
    case limit_kind::tokens_per_day:
      return "tokens_per_day";
    case limit_kind::concurrent_streams:
      return "concurrent_streams";
    case limit_kind::usd_per_day:
      return "usd_per_day";
    case limit_kind::usd_per_month:
      return "usd_per_month";
  }
  return "unknown";
}

long long amount_of(limit_kind kind, const usage& u, const demand& d) {
  switch (kind) {
    case limit_kind::requests_per_minute:
    case limit_kind::concurrent_streams:
      return 1;
    case limit_kind::tokens_per_minute:
    case limit_kind::tokens_per_day:
      return u.input_tokens + u.output_tokens;
    case limit_kind::usd_per_day:
    case limit_kind::usd_per_month: {
      const long long cached = std::clamp(u.cached_input_tokens, 0LL, u.input_tokens);
      const long long written = std::clamp(u.cache_write_tokens, 0LL, u.input_tokens - cached);
      const long long plain = u.input_tokens - cached - written;
      return std::llround(static_cast<double>(plain) * d.input_price +
                          static_cast<double>(cached) * d.cached_input_price +
                          static_cast<double>(written) * d.cache_write_price +
                          static_cast<double>(u.output_tokens) * d.output_price);
    }
  }
  return 0;
}

demand demand_for(const config::config& cfg, const config::route& route,
                  const config::client_key* key, std::string_view model, std::size_t body_bytes,
                  std::optional<long long> output_limit) {
  demand d;
  const bool key_has = key && key->budget.any();
  if (!key_has && !route.budget.any()) return d;
  d.estimate = {routing::prompt_tokens_estimate(body_bytes),
                output_limit.value_or(output_reserve_without_limit)};
  if (const auto* price = price_of(cfg, model)) {
    d.input_price = price->input_per_million;  // micro-dollars per token
    d.output_price = price->output_per_million;
    d.cached_input_price = price->cached_input_per_million.value_or(d.input_price);
    d.cache_write_price = price->cache_write_per_million.value_or(d.input_price);
  }
  std::int64_t longest_ms = 0;
  for (const auto& target : route.targets)
    if (auto u = cfg.upstreams.find(target.upstream); u != cfg.upstreams.end())
      longest_ms = std::max<std::int64_t>(
          longest_ms,
          std::chrono::duration_cast<std::chrono::milliseconds>(u->second.timeouts.total).count());
  d.slot_ttl_ms = longest_ms + 60'000;
  if (key_has) {
    d.key_name = key->name;
    add_counters(d, "key:" + key->name, key->budget);
  }
  if (route.budget.any()) add_counters(d, "route:" + route.name, route.budget);
  return d;
}

demand requests_only(demand d) {
  std::erase_if(d.counters,
                [](const counter& c) { return c.kind != limit_kind::requests_per_minute; });
  d.estimate = {};
  return d;
}

demand billed_hit(demand d, const usage& stored) {
  std::erase_if(d.counters,
                [](const counter& c) { return c.kind == limit_kind::concurrent_streams; });
  d.estimate = stored;
  for (auto& c : d.counters) c.amount = amount_of(c.kind, stored, d);
  return d;
}

}  // namespace tokengate::budget
