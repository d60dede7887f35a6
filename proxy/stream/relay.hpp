#pragma once
// The proxy exchange for one request: send it upstream, relay the response
// to the client chunk by chunk as it arrives, and watch the client so that
// its disconnect closes the upstream at once.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "net.hpp"

namespace tokengate {

class any_stream;
class worker;
struct request_context;
namespace config { struct listener; }

// Returns whether the client connection may carry another request.
net::awaitable<bool> proxy_exchange(any_stream& client, beast::flat_buffer& client_buffer,
                                    http::request<http::string_body>& request, worker& w,
                                    const config::listener& listener, request_context& ctx);

// Writes a complete error response with an OpenAI-style JSON body.
net::awaitable<void> send_json_error(any_stream& client, unsigned status, std::string_view message,
                                     std::string_view type, std::string_view code,
                                     bool keep_alive, request_context& ctx);

}  // namespace tokengate
