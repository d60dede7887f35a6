#include "config/cache_section.hpp"

#include <algorithm>

namespace tokengate::config {

cache_settings read_route_cache(const reader& r, const std::string& route_name) {
  r.only_keys({"ttl", "max_entry_bytes", "mode", "scope"});
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
  return s;
}

std::size_t read_cache_bound(const reader& r) {
  r.only_keys({"max_bytes"});
  return r.integer<std::size_t>("max_bytes", 256 * 1024 * 1024, 1024, 1LL << 40);
}

void check_caches(const reader& root, const config& c) {
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
