#pragma once
// Whether another socket already listens on an address and port.
//
// Every listener is opened with SO_REUSEPORT so that a new binary can start
// beside a draining one (a binary upgrade without a gap) or two instances
// can share a port (docs/operations.md). The same option lets a second
// `tokengate serve` started by mistake on a production port take half its
// new connections without a word: the kernel refuses the bind only to a
// socket without the option (or another user's). So before binding, the
// server asks with a bind of its own, without SO_REUSEPORT, and says in its
// log that it is sharing the port.
#include <boost/asio/ip/tcp.hpp>

namespace tokengate {

// True when the address is already taken by a listening socket (the probe's
// bind fails with EADDRINUSE); false when it is free or the probe itself
// could not be made. A port waiting in TIME_WAIT counts as free, as it does
// for the real bind.
bool port_already_listened(const boost::asio::ip::tcp::endpoint& endpoint);

}  // namespace tokengate
