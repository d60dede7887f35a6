#pragma once
// A planned request's admission, then its exchange. The refusals that
// cost nothing come before any wait: the budget (budget/: a reservation in
// this process, in leases or one Redis round trip; 429 with Retry-After,
// or 503 while the shared store does not answer and on_store_failure is
// deny), then a slot on the fleet (fleet/: may wait in the route's queue;
// 429 or 503 when none frees). A request its budget refuses never takes a
// queue place or a slot; one the fleet refuses gives its reservation back
// whole. An admitted request's reservation is settled at its end with
// what the upstream really used.
#include "budget/demand.hpp"
#include "budget/gate.hpp"
#include "fleet/board.hpp"
#include "http/client_request.hpp"
#include "http/request_context.hpp"
#include "io/any_stream.hpp"
#include "io/client_watcher.hpp"
#include "io/net.hpp"
#include "upstream/exchange.hpp"

namespace tokengate {

class worker;

// What a request used, as its end recorded it: the upstream's usage where it
// gave one (a stream's usage event, or a whole answer's usage member);
// else the token events of a stream (all a client that went away was
// sent), or the estimate for an answer that was not streamed. Nothing,
// when no upstream answered or it answered an error without usage.
budget::usage usage_of(const request_context& ctx, const budget::demand& d);

// A budget's refusal (429 with Retry-After, or 503 while its store does
// not answer), in the client's API.
net::awaitable<void> refuse_by_budget(any_stream& client, const budget::admission& a,
                                      bool keep_alive, request_context& ctx);

// Returns whether the client connection may carry another request.
// `demand` may be empty (no budget applies).
net::awaitable<bool> admitted_exchange(any_stream& client, client_watcher& watcher,
                                       client_request& request, worker& w,
                                       upstream::exchange_plan& plan, request_context& ctx,
                                       budget::demand demand, fleet::admission_request slot,
                                       bool keep_alive);

}  // namespace tokengate
