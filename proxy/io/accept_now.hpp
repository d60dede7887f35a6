#pragma once
// Accepting as nginx does: accept4 hands each connection over already
// non-blocking (and close-on-exec), where Asio's accept takes it blocking and
// the first operation on it costs an ioctl to switch; and the socket is known
// to be our own descriptor, not a duplicate, so that closing it is one
// close() (Asio takes an adopted descriptor for a possible duplicate and
// removes it from epoll first: an epoll_ctl per connection). Taking every
// waiting connection at once, after one wait on the listener, also spares
// the posted completion of each accept that Asio's speculative attempt finds
// ready (a zero-timeout epoll_wait before the session could start).
#include <optional>

#include "io/net.hpp"

namespace tokengate {

// Whether a socket accepted from a listener starts with the listener's
// TCP_NODELAY and TCP_INQ (Linux copies an accepted socket from its
// listener): then both are set once on the listener instead of two
// setsockopt calls per connection. Probed once per process, on a listener
// of its own on the loopback; false where either is not inherited.
bool accepted_sockets_inherit_options();

// Takes one connection waiting on `acceptor` (which must be non-blocking)
// now. Nothing, with `ec` set, when none waits (would_block) or the accept
// failed; `peer` is the client's address.
std::optional<tcp::socket> accept_now(tcp::acceptor& acceptor, tcp::endpoint& peer, error_code& ec);

}  // namespace tokengate
