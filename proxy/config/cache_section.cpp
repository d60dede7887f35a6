#include "config/cache_section.hpp"

#include <algorithm>

namespace tokengate::config {

cache_settings read_route_cache(const reader& r, const std::string& route_name) {
  r.only_keys({"ttl", "max_entry_bytes", "mode", "scope", "pace", "bill_hits"});
  if (!r.has("ttl"))
    r.fail("route '" + route_name +
           "': cache needs a 'ttl' (an answer kept for ever outlives "
           "the model that gave it)");
  cache_settings s;
  s.ttl = r.time("ttl", s.ttl);
  if (s.ttl.count() <= 0) r.fail_at(r.node()["ttl"], "cache.ttl must be more than 0");
  s.max_entry_bytes =
      r.integer<std::size_t>("max_entry_bytes", s.max_entry_bytes, 1, 64 * 1024 * 1024);
  auto mode = r.text("mode", "deterministic");
  if (mode == "always")
    s.mode = cache_mode::always;
  else if (mode != "deterministic")
    r.fail_at(r.node()["mode"], "cache.mode must be deterministic or always");
  auto scope = r.text("scope", "key");
  if (scope == "route")
    s.scope = cache_scope::route;
  else if (scope != "key")
    r.fail_at(r.node()["scope"], "cache.scope must be key or route");
  auto pace = r.text("pace", "none");
  if (pace == "original")
    s.paced = true;
  else if (pace != "none")
    r.fail_at(r.node()["pace"], "cache.pace must be none or original");
  if (r.has("bill_hits"))
    s.bill_hits = r.converted<bool>(r.node()["bill_hits"], "bill_hits", "true or false");
  return s;
}

void read_cache_store(const reader& r, config& c) {
  r.only_keys({"max_bytes", "store"});
  c.cache_max_bytes = r.integer<std::size_t>("max_bytes", 256 * 1024 * 1024, 1024, 1LL << 40);
  auto store = r.text("store", "memory");
  if (store == "redis")
    c.cache_in_redis = true;
  else if (store != "memory")
    r.fail_at(r.node()["store"], "cache.store must be memory or redis");
}

void check_caches(const reader& root, const config& c) {
  if (c.cache_in_redis && !c.redis)
    root.fail_at(root.node()["cache"]["store"],
                 "cache.store: redis needs the top-level 'redis:' connection");
  const auto& routes = root.node()["routes"];
  for (std::size_t i = 0; i < c.routes.size(); ++i) {
    const auto& rt = c.routes[i];
    if (!rt.cache || rt.cache->scope != cache_scope::route || c.keys.empty()) continue;
    auto differs = std::any_of(c.keys.begin(), c.keys.end(), [&](const client_key& k) {
      return k.models != c.keys.front().models;
    });
    if (differs)
      root.fail_at(routes[i]["cache"]["scope"],
                   "route '" + rt.name +
                       "': cache.scope: route shares answers between keys, but the keys may "
                       "use different models; use scope: key");
  }
}

}  // namespace tokengate::config
