#pragma once
// A planned request carried to its end: the upstreams tried until one
// answers (upstream/exchange.hpp), that answer relayed (stream/relay.hpp),
// or the error written, while the client watcher (io/client_watcher.hpp)
// reads from the client so that its disconnect closes the upstream at once.
#include "http/client_request.hpp"
#include "http/request_context.hpp"
#include "io/any_stream.hpp"
#include "io/client_watcher.hpp"
#include "io/net.hpp"
#include "upstream/exchange.hpp"

namespace tokengate {

class worker;

// Returns whether the client connection may carry another request.
net::awaitable<bool> proxy_exchange(any_stream& client, client_watcher& watcher,
                                    client_request& request, worker& w,
                                    upstream::exchange_plan& plan, request_context& ctx);

}  // namespace tokengate
