#pragma once
// Budgets counted in Redis (budget/redis_scripts.hpp): the commands that
// reserve, settle and peek, and what their replies say. The round trips
// themselves are the worker's redis::client's.
#include <optional>
#include <string>
#include <vector>

#include "budget/ledger.hpp"
#include "budget/local_ledger.hpp"
#include "redis/resp.hpp"

namespace tokengate::budget::redis_ledger {

// The scripts a connection loads first (SCRIPT LOAD), in this order.
std::vector<std::string> scripts();

// `leases`: what each counter should grant beyond its amount (0 for none).
std::vector<std::string> reserve_command(const std::string& prefix, const demand& d,
                                         const std::string& id,
                                         const std::vector<long long>& leases);
// The reservation the reply describes; nullopt when the reply is not one
// (an error, or a shape the script does not return).
std::optional<reservation> read_reserve_reply(const redis::reply& r, const demand& d,
                                              std::string id);

// Real usage in place of the estimate (usage{} gives the tokens back).
std::vector<std::string> settle_command(const demand& d, const reservation& r, const usage& real);
// The whole reservation back, the request's count included.
std::vector<std::string> give_back_command(const demand& d, const reservation& r);
// Each counter of `r` moved by its delta (a concurrency slot given back).
std::vector<std::string> adjust_command(const reservation& r, const std::vector<long long>& deltas);
// What this instance counted alone while Redis was down, added to Redis.
std::vector<std::string> carry_command(const std::string& prefix,
                                       const std::vector<local_ledger::carried>& counted);

std::vector<std::string> peek_command(const std::string& prefix, const demand& d);
std::optional<std::vector<counter_state>> read_peek_reply(const redis::reply& r, const demand& d);

}  // namespace tokengate::budget::redis_ledger
