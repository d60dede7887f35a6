#pragma once
// The parts of the config that budget/ applies: `budget:` under a key or a
// route, `prices:` and `redis:` at the top.
#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace tokengate::config {

// `budget: {requests_per_minute, tokens_per_minute, tokens_per_day,
// concurrent_streams, usd_per_day, usd_per_month}`: every value positive.
budget_limits read_budget(const reader& r);

// `prices: {MODEL: {input_per_million, output_per_million,
// cached_input_per_million, cache_write_per_million}}`.
std::map<std::string, model_price> read_prices(const reader& r);

// `redis: {url: redis://[:PASSWORD@]HOST[:PORT][/DB], timeout, on_store_failure,
// replicas, key_prefix}`.
redis_settings read_redis(const reader& r);

// What holds only for the config as a whole: a price names a model some
// route serves; a spend budget has prices for what its key or route may
// use. `root` is the top-level mapping (for the error's position).
void check_budgets(const reader& root, const config& c);

}  // namespace tokengate::config
