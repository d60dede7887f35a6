#pragma once
// Which headers cross the proxy. Hop-by-hop headers (RFC 9110 §7.6.1) and any
// header a Connection header names belong to one connection and are dropped;
// credentials are replaced when the upstream has its own key.
#include <boost/beast/http/fields.hpp>

#include <string_view>

#include "net.hpp"

namespace tokengate {

bool is_hop_by_hop(std::string_view name);

struct upstream_credentials {
  enum class style { none, bearer, x_api_key } how = style::none;
  std::string_view key;
  std::string_view anthropic_version = "2023-06-01";
};

// Client request headers → upstream request headers.
void forward_request_headers(const http::fields& client, http::fields& upstream,
                             std::string_view upstream_host, std::string_view request_id,
                             const upstream_credentials& credentials);

// Upstream response headers → client response headers (without framing:
// the caller decides Content-Length or chunked).
void forward_response_headers(const http::fields& upstream, http::fields& client,
                              std::string_view request_id);

}  // namespace tokengate
