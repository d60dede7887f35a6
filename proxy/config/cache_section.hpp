#pragma once
// The parts of the config that cache/ applies: a route's `cache` and the
// top-level `cache: {max_bytes}`.
#include <string>

#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace tokengate::config {

// `cache: {ttl, max_entry_bytes, mode, scope, pace, bill_hits}` of one route. A cache
// without a TTL is refused: an answer kept for ever outlives the model.
cache_settings read_route_cache(const reader& r, const std::string& route_name);

// The top level's `cache: {max_bytes, store}`.
void read_cache_store(const reader& r, config& c);

// What holds only for the config as a whole: `store: redis` needs
// `redis:`; `scope: route` shares a
// route's answers between keys, which is refused when the keys may use
// different models (a key would read answers its own permissions could
// not have produced).
void check_caches(const reader& root, const config& c);

}  // namespace tokengate::config
