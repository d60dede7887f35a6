#pragma once
// Reading a request's body, and forwarding a long one while it arrives.
//
// Read whole, then scanned, then sent, a 4 MB prompt is copied by the
// kernel into a 4 MB buffer and out of it again after it has left the CPU's
// cache, and the upstream starts receiving only when the last byte is in.
// nginx passes 64 KB on while they are hot. Here the policy's decision is
// made on the body's first members (`model`, `stream`, the limits come
// first from most clients), and the body goes on as it comes, with the
// decision's edits spliced in, all but its last byte. Nothing is given up:
// the bytes are kept, the whole body is still scanned and the policy run
// on it (dispatch.cpp); if that finds the body invalid or the decision
// different (a later `max_tokens`, a second `model`), the connection is
// closed before the last byte, so the upstream never had a complete
// request, and the request goes the usual way.
#include <boost/beast/core/flat_buffer.hpp>
#include <memory>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "http/client_request.hpp"
#include "http/request_context.hpp"
#include "io/net.hpp"
#include "upstream/pool.hpp"

namespace tokengate {

class any_stream;
class worker;
namespace routing {
struct routed_request;
}

// What forwarding early left: the upstream connection holding all of the
// request but the body's last byte (or the failure to connect, which the
// exchange reports rather than meet twice), and the decision it was sent
// under. Let go unused, the connection closes: the request never completes.
struct early_forward {
  std::shared_ptr<const config::config> config;  // the snapshot it was decided on
  const config::upstream* upstream = nullptr;    // where it went
  const config::route_target* target = nullptr;  // the route's target (null without routes)
  // The decision the body's first members gave (with routes).
  const config::route* route = nullptr;
  std::string model;
  std::optional<long long> output_limit;
  bool stream = false;
  bool usage_needed = false;
  std::size_t decided_on = 0;  // the members before this offset made it
  upstream::acquire_result acquired;

  // Whether the decision on the whole body is the one sent: the same
  // route, model, stream and limit, and no member the policy reads after
  // the ones it was made on (with duplicate keys the last one counts).
  bool agrees_with(const routing::routed_request& whole, std::string_view path) const;
};

// The body was forwarded early but the whole of it asks for another plan
// (or was refused): the connection closes now, before the body's last
// byte, so the upstream never had a complete request (and does not wait
// for the rest of it while this request runs its course). Nothing happens
// when the plan took the connection, or there was none.
void abandon_early_forward(worker& w, std::unique_ptr<early_forward>& early);

// Reads the body of a request whose head has been read (the errors of
// read_message.hpp). When `may_forward` and the body is long (a known length of
// limits.forward_early_bytes or more, 16 KiB at least), it is forwarded
// as it arrives where the first members allow a decision, and `early` is
// set once the upstream holds all of it but its last byte.
net::awaitable<error_code> read_body(any_stream& client, beast::flat_buffer& buffer,
                                     client_request& request, worker& w,
                                     const config::listener& listener, request_context& ctx,
                                     bool may_forward, std::unique_ptr<early_forward>& early);

}  // namespace tokengate
