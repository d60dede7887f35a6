#pragma once
#include "net.hpp"

namespace tokengate {

class any_stream;
class worker;
namespace config { struct listener; }

// One client connection, from the TLS handshake (if any) to the close:
// read a request with limits → proxy it → repeat while keep-alive.
net::awaitable<void> run_session(any_stream stream, worker& w, const config::listener& listener);

}  // namespace tokengate
