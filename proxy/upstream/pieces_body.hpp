#pragma once
// The upstream request's body as pieces that live elsewhere: the client's
// request body around the few values the policy changed, and the changed
// values. A body type so that Beast's prepare_payload sizes it; the relay
// writes the head (server/head_bytes.hpp) and these pieces in one scatter
// write, so a 200 KB prompt is never copied to change its model name.
#include <boost/beast/http/message.hpp>

#include <vector>

#include "net.hpp"

namespace tokengate::upstream {

struct pieces_body {
  using value_type = std::vector<net::const_buffer>;

  static std::uint64_t size(const value_type& pieces) { return net::buffer_size(pieces); }
};

}  // namespace tokengate::upstream
