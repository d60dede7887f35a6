#pragma once
// From a request that has been read to an answer: the API endpoints go
// through the policy (when the config has routes) to a plan of upstreams,
// then to the proxy exchange; everything else gets a JSON error.
#include <boost/beast/http/message.hpp>
#include <memory>

#include "http/client_request.hpp"
#include "io/net.hpp"

namespace tokengate {

class any_stream;
class client_watcher;
class worker;
struct request_context;
struct early_forward;
namespace config {
struct listener;
}

// Returns whether the connection may carry another request. `early`: what
// forwarding the body while it arrived left (server/early_forward.hpp); it
// is used when the whole body agrees with it, and closed otherwise.
net::awaitable<bool> dispatch_request(any_stream& stream, client_watcher& watcher,
                                      client_request& request, worker& w,
                                      const config::listener& listener, request_context& ctx,
                                      bool keep_alive, std::unique_ptr<early_forward>& early);

}  // namespace tokengate
