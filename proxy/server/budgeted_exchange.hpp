#pragma once
// The proxy exchange of a request that has a budget (budget/): reserved
// first, refused with 429 (or 503 while the shared store does not answer
// and on_store_failure is deny) without an upstream call, and settled at
// its end with what the upstream really used.
#include "budget/demand.hpp"
#include "http/client_request.hpp"
#include "http/request_context.hpp"
#include "io/any_stream.hpp"
#include "io/client_watcher.hpp"
#include "io/net.hpp"
#include "upstream/exchange.hpp"

namespace tokengate {

class worker;

// What a request used, as its end recorded it: the upstream's usage where it
// gave one; else the token events of a stream (all a client that went away
// was sent), or the estimate for an answer that was not streamed. Nothing,
// when no upstream answered or it answered an error without usage.
budget::usage usage_of(const request_context& ctx, const budget::demand& d);

// Returns whether the client connection may carry another request.
net::awaitable<bool> budgeted_exchange(any_stream& client, client_watcher& watcher,
                                       client_request& request, worker& w,
                                       upstream::exchange_plan& plan, request_context& ctx,
                                       budget::demand demand, bool keep_alive);

}  // namespace tokengate
