#pragma once
// What one request asks of the budgets that apply to it: a counter per
// limit of its key and of its route, each with the amount to reserve at
// admission. The amounts are estimates (the prompt as bytes / 4, the whole
// output limit); settle() replaces them with the real usage.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace tokengate::budget {

enum class limit_kind : std::uint8_t {
  requests_per_minute,
  tokens_per_minute,
  tokens_per_day,
  concurrent_streams,
  usd_per_day,
  usd_per_month,
};

// The YAML name, also the metric label and part of the store's key.
std::string_view kind_name(limit_kind kind);

// USD counted as micro-dollars, so every counter is an integer.
constexpr double micro_usd_per_usd = 1e6;

// Output tokens reserved for a request that sets no output limit and gets
// none from its route (a route with a budget should set
// max_output_tokens.default; docs/configuration.md).
constexpr long long output_reserve_without_limit = 4096;

struct counter {
  std::string scope;  // "key:NAME" or "route:NAME"
  limit_kind kind;
  long long limit;   // (micro-dollars for the USD kinds)
  long long amount;  // reserved at admission
};

struct usage {
  long long input_tokens = 0;  // every prompt token, cached and cache-written included
  long long output_tokens = 0;
  // Of input_tokens: read from the provider's prompt cache, and written to
  // it (priced apart in the USD counters; the token counters count them
  // as input).
  long long cached_input_tokens = 0;
  long long cache_write_tokens = 0;
};

struct demand {
  std::vector<counter> counters;
  usage estimate;  // what the reservation assumed
  // Micro-dollars per token, for the USD counters (0 without a price).
  double input_price = 0, output_price = 0;
  // … for input read from a prompt cache, and written to one (the input
  // price where the model's price names none).
  double cached_input_price = 0, cache_write_price = 0;
  std::string key_name;  // for the refusal's message; empty without a key
  // How long a concurrency slot may outlive its request in the shared
  // store when the instance holding it dies (the longest upstream total
  // timeout of the route, and a minute).
  std::int64_t slot_ttl_ms = 16 * 60 * 1000;
  bool empty() const { return counters.empty(); }
};

// The amount `kind` counts for a request of usage `u` (requests and
// concurrency count 1 whatever the usage).
long long amount_of(limit_kind kind, const usage& u, const demand& d);

// The counters that apply to a request on `route` by `key` (null without
// keys) for `model`, whose body is `body_bytes` long and whose output limit
// after policy is `output_limit`. Empty when neither has a budget.
// What an answer from the response cache asks: a request, never tokens
// or dollars (its counters of requests per minute alone).
demand requests_only(demand d);
// … and, on a route whose cache bills its hits (cache: {bill_hits: true}),
// the stored answer's tokens and dollars as well, as if asked again (no
// concurrency slot: a hit is over as soon as it is written).
demand billed_hit(demand d, const usage& stored);

demand demand_for(const config::config& cfg, const config::route& route,
                  const config::client_key* key, std::string_view model, std::size_t body_bytes,
                  std::optional<long long> output_limit);

}  // namespace tokengate::budget
