#pragma once
#include "http/request_context.hpp"

namespace tokengate {

class worker;

// The last phase of every request: its timing record becomes metrics (this
// worker's shard) and one access-log line.
void record_request(worker& w, const request_context& ctx);

}  // namespace tokengate
