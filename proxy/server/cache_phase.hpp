#pragma once
// The cache phase, on a route with `cache:` (cache/): once the route is
// known and before any admission, the answer kept for the same request is
// looked up, in either form: a streamed request and a whole one share
// their entry (cache/forms.hpp). A hit is answered from it: a request
// against the budgets, no tokens, no slot, no upstream. A
// miss goes on to the exchange with a copy of its answer taken, and the
// answer is kept once the exchange has ended, if it completed: a natural
// finish with usage, never an error, a cut at the output limit, a failed
// or resumed stream, or one larger than `max_entry_bytes`. The client's
// Cache-Control is honoured: no-cache skips the lookup, no-store the
// keeping, max-age=N takes only an entry younger than N seconds.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "budget/demand.hpp"
#include "cache/store.hpp"
#include "config/config.hpp"
#include "http/client_request.hpp"
#include "http/request_context.hpp"
#include "io/net.hpp"
#include "routing/policy.hpp"
#include "upstream/exchange.hpp"

namespace tokengate {

class any_stream;
class worker;

struct cache_decision {
  std::shared_ptr<const cache::entry> hit;
  std::string key;  // a miss whose answer may be kept
  const config::cache_settings* settings = nullptr;
  bool streamed = false;  // the form the client asked for
  // cache: {store: redis}: the entry to look up there (look_up_shared).
  std::string shared_key;
  std::optional<std::chrono::seconds> max_age;
};

// Nothing on a route without a cache. Sets ctx.cache. With the entries in
// Redis, the lookup is left to look_up_shared.
cache_decision look_up_answer(worker& w, const routing::routed_request& routed,
                              const client_request& request, request_context& ctx);

// The lookup in Redis (cache: {store: redis}), after the plan is made: it
// waits at most redis.timeout, and a store that does not answer is a miss.
// (A hit found here drops the planned exchange unused.)
net::awaitable<void> look_up_shared(worker& w, cache_decision& d, request_context& ctx);

// A miss or a bypass: the client is told so, and an answer that may be
// kept is copied as it passes.
void prepare_exchange(const cache_decision& d, upstream::exchange_plan& plan,
                      const request_context& ctx);

// A hit, answered: it counts as a request against the key's and the
// route's requests_per_minute (refused as any request past it), never
// tokens or dollars unless the route bills its hits (bill_hits: the stored
// usage counted as if asked again). Streamed at once, or at the original's
// pace (pace: original). Returns whether the connection may carry another
// request.
net::awaitable<bool> answer_from_cache(any_stream& stream, worker& w, const cache_decision& d,
                                       const client_request& request, request_context& ctx,
                                       budget::demand demand, bool keep_alive);

// After the exchange: its answer kept, when it may be.
void keep_answer(worker& w, const cache_decision& d, upstream::exchange_plan& plan,
                 const request_context& ctx);

}  // namespace tokengate
