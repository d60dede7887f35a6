#pragma once
#include "http/request_context.hpp"

namespace tokengate {

// One JSON line per request on the "access" logger. Never a header value,
// a key or prompt text: only what ops need to find a request and its timing.
void log_access(const request_context& ctx);

}  // namespace tokengate
