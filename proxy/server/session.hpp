#pragma once
#include "io/net.hpp"

namespace tokengate {

class any_stream;
class connection_ticket;
class worker;
namespace config {
struct listener;
}

// One client connection, from the TLS handshake (if any) to the close:
// read a request with limits → proxy it → repeat while keep-alive. The
// ticket is the connection's place in the connection limits, given back when
// the session ends; a client over its per-address share gets a 429.
net::awaitable<void> run_session(any_stream stream, connection_ticket ticket, worker& w,
                                 const config::listener& listener);

}  // namespace tokengate
