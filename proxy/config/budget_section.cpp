#include "config/budget_section.hpp"

#include <algorithm>

#include "config/glob.hpp"

namespace tokengate::config {
namespace {

std::optional<long long> positive_count(const reader& r, const char* key) {
  if (!r.has(key)) return std::nullopt;
  return r.integer<long long>(key, 0, 1, 1'000'000'000'000LL);
}

std::optional<double> positive_usd(const reader& r, const char* key) {
  if (!r.has(key)) return std::nullopt;
  double usd = r.number(key, 0, 0, 1e12);
  if (usd <= 0) r.fail_at(r.node()[key], std::string("'") + key + "' must be more than 0");
  return usd;
}

// redis://[:PASSWORD@]HOST[:PORT][/DB] (or user:password@; Redis 6 ACL users
// are not supported: AUTH is sent with the password alone).
void read_redis_url(const reader& r, redis_settings& s) {
  auto url = r.text("url", "");
  const auto at = r.node()["url"];
  constexpr std::string_view scheme = "redis://";
  if (url.rfind(scheme, 0) != 0) r.fail_at(at, "'url' must look like redis://host:port");
  std::string rest = url.substr(scheme.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    auto db = rest.substr(slash + 1);
    rest.resize(slash);
    if (!db.empty()) {
      if (db.size() > 2 || !std::all_of(db.begin(), db.end(), ::isdigit))
        r.fail_at(at, "the database in 'url' must be a number from 0 to 99");
      s.database = std::stoi(db);
    }
  }
  if (auto userinfo_end = rest.rfind('@'); userinfo_end != std::string::npos) {
    auto userinfo = rest.substr(0, userinfo_end);
    rest.erase(0, userinfo_end + 1);
    auto colon = userinfo.find(':');
    s.password = colon == std::string::npos ? userinfo : userinfo.substr(colon + 1);
  }
  auto colon = rest.rfind(':');
  s.host = rest.substr(0, colon);
  if (colon != std::string::npos) {
    auto port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) ||
        std::stoi(port) == 0 || std::stoi(port) > 65535)
      r.fail_at(at, "the port in 'url' must be a number from 1 to 65535");
    s.port = static_cast<std::uint16_t>(std::stoi(port));
  }
  if (s.host.empty()) r.fail_at(at, "'url' needs a host: redis://host:port");
}

bool some_route_serves(const config& c, const std::string& model) {
  for (const auto& route : c.routes)
    for (const auto& pattern : route.models)
      if (glob_match(pattern, model)) return true;
  return false;
}

}  // namespace

budget_limits read_budget(const reader& r) {
  r.only_keys({"requests_per_minute", "tokens_per_minute", "tokens_per_day", "concurrent_streams",
               "usd_per_day", "usd_per_month"});
  budget_limits b;
  b.requests_per_minute = positive_count(r, "requests_per_minute");
  b.tokens_per_minute = positive_count(r, "tokens_per_minute");
  b.tokens_per_day = positive_count(r, "tokens_per_day");
  b.concurrent_streams = positive_count(r, "concurrent_streams");
  b.usd_per_day = positive_usd(r, "usd_per_day");
  b.usd_per_month = positive_usd(r, "usd_per_month");
  if (!b.any()) r.fail("a budget needs at least one limit");
  return b;
}

std::map<std::string, model_price> read_prices(const reader& r) {
  if (!r.node().IsMap())
    r.fail(
        "'prices' must map model names to {input_per_million, output_per_million, "
        "cached_input_per_million, cache_write_per_million}");
  std::map<std::string, model_price> prices;
  for (const auto& entry : r.node()) {
    reader p(entry.second, r.file());
    p.only_keys({"input_per_million", "output_per_million", "cached_input_per_million",
                 "cache_write_per_million"});
    model_price price{p.number("input_per_million", 0, 0, 1e9),
                      p.number("output_per_million", 0, 0, 1e9)};
    if (p.has("cached_input_per_million"))
      price.cached_input_per_million = p.number("cached_input_per_million", 0, 0, 1e9);
    if (p.has("cache_write_per_million"))
      price.cache_write_per_million = p.number("cache_write_per_million", 0, 0, 1e9);
    prices.emplace(entry.first.as<std::string>(), price);
  }
  return prices;
}

redis_settings read_redis(const reader& r) {
  r.only_keys({"url", "timeout", "on_store_failure", "replicas", "key_prefix"});
  redis_settings s;
  if (!r.has("url")) r.fail("'redis' needs a 'url' (redis://host:port)");
  read_redis_url(r, s);
  s.timeout = r.time("timeout", s.timeout);
  if (s.timeout.count() <= 0) r.fail_at(r.node()["timeout"], "'timeout' must be more than 0");
  auto mode = r.text("on_store_failure", "deny");
  if (mode == "deny")
    s.on_failure = store_failure_mode::deny;
  else if (mode == "allow_local")
    s.on_failure = store_failure_mode::allow_local;
  else
    r.fail_at(r.node()["on_store_failure"], "on_store_failure must be deny or allow_local");
  s.replicas = r.integer<int>("replicas", 1, 1, 10000);
  s.key_prefix = r.text("key_prefix", s.key_prefix);
  if (s.key_prefix.empty() || s.key_prefix.find_first_of(" \r\n") != std::string::npos)
    r.fail_at(r.node()["key_prefix"], "'key_prefix' must be a word without spaces");
  return s;
}

void check_budgets(const reader& root, const config& c) {
  for (const auto& [model, price] : c.prices)
    if (!some_route_serves(c, model))
      root.fail_at(root.node()["prices"][model],
                   "a price for model '" + model + "', which no route serves");
  auto spends = [](const budget_limits& b) { return b.usd_per_day || b.usd_per_month; };
  bool any_spend =
      std::any_of(c.keys.begin(), c.keys.end(), [&](const auto& k) { return spends(k.budget); }) ||
      std::any_of(c.routes.begin(), c.routes.end(),
                  [&](const auto& rt) { return spends(rt.budget); });
  if (any_spend && c.prices.empty())
    root.fail("a budget in USD needs 'prices' for the models it is spent on");
}

}  // namespace tokengate::config
