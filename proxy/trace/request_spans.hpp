#pragma once
// One request's spans, made from what its context recorded once it has
// ended: the server span (GenAI and HTTP attributes, tokengate's own, the
// first token and a limit cut as events, the status from the outcome) and
// a client span per upstream attempt. Prompts and completions are never
// recorded.
#include <vector>

#include "config/config.hpp"
#include "http/request_context.hpp"
#include "trace/span.hpp"

namespace tokengate::trace {

std::vector<span> spans_for(const request_context& ctx, const config::config& cfg);

}  // namespace tokengate::trace
