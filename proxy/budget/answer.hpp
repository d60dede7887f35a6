#pragma once
// What a client with a budget is told: OpenAI's rate-limit headers on
// every answer, and at a refusal a 429 naming the limit with Retry-After.
#include <string>
#include <utility>
#include <vector>

#include "budget/ledger.hpp"
#include "http/request_error.hpp"

namespace tokengate::budget {

using header_list = std::vector<std::pair<std::string, std::string>>;

// x-ratelimit-limit-requests / -remaining-requests / -reset-requests from
// the tightest requests_per_minute counter, and the -tokens ones from the
// tightest token counter (per minute or per day), as OpenAI sends them.
header_list rate_limit_headers(const demand& d, const reservation& r);

// The 429 for a refused reservation: OpenAI's rate_limit_exceeded (or
// insufficient_quota for a spend budget), naming the scope, the limit, what
// is used and what the request needed.
request_error refusal(const demand& d, const reservation& r);
// Its Retry-After: whole seconds until the refused counter's window ends
// (1 for a concurrency limit).
std::string retry_after(const demand& d, const reservation& r);

// The 503 when the shared store does not answer and on_store_failure is deny.
request_error store_unavailable();

// A duration the way OpenAI's reset headers write it: "20ms", "1s", "6m0s".
std::string reset_text(std::int64_t ms);

}  // namespace tokengate::budget
