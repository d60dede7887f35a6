#pragma once
// From a request that has been read to an answer: the API endpoints go
// through the policy (when the config has routes) to a plan of upstreams,
// then to the proxy exchange; everything else gets a JSON error.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include "net.hpp"
#include "server/request_body.hpp"

namespace tokengate {

class any_stream;
class worker;
struct request_context;
namespace config { struct listener; }

// Returns whether the connection may carry another request.
net::awaitable<bool> dispatch_request(any_stream& stream, beast::flat_buffer& buffer,
                                      client_request& request, worker& w,
                                      const config::listener& listener, request_context& ctx, bool keep_alive);

}  // namespace tokengate
