#pragma once
// The request an upstream receives: the client's head with its own fields
// (host, credentials, request id), and the client's body around the
// policy's edits, as the pieces of one scatter write (never copied whole).
#include <string>
#include <vector>

#include "config/config.hpp"
#include "http/client_request.hpp"
#include "io/net.hpp"
#include "upstream/body_edits.hpp"

namespace tokengate {

struct request_context;
namespace upstream {
class pool;
}

// The head, written in one pass into `head` (which must outlive the
// pieces), then the body's pieces. The body's bytes need not all be there
// yet: the pieces point into its buffer, sized to its whole length. A plain
// function: the request's header fields are not kept in a coroutine frame
// for the length of a stream. `target`: the path a translated request goes
// to (translate/), in place of the client's; empty for the client's own.
std::vector<net::const_buffer> upstream_request(const client_request& request,
                                                const upstream::pool& pool,
                                                const config::upstream& settings,
                                                const request_context& ctx,
                                                const std::vector<upstream::splice>& edits,
                                                std::string_view target, std::string& head);

}  // namespace tokengate
