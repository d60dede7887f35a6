#pragma once
// Which headers cross the proxy. Hop-by-hop headers (RFC 9110 §7.6.1) and any
// header a Connection header names belong to one connection and are dropped;
// credentials are replaced when the upstream has its own key.
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "http/head_bytes.hpp"
#include "http/request_head.hpp"
#include "http/response_head.hpp"
#include "io/net.hpp"

namespace tokengate {

bool is_hop_by_hop(std::string_view name);

struct upstream_credentials {
  enum class style { none, bearer, x_api_key } how = style::none;
  std::string_view key;
  std::string_view anthropic_version = "2023-06-01";
  bool anthropic_version_needed = false;  // sent when the client sent none, whatever the key
};

// Client request headers → the upstream request's fields: the client's
// end-to-end fields in their order, then Host, Accept-Encoding, the
// request id and the upstream's credentials.
// Each forwarded field goes as the line the client wrote, consecutive ones
// in one copy.
// `traceparent`: tokengate's own, in place of the client's, with
// `tracestate` in place of the client's (empty: none); with no
// traceparent (the request is not traced), the client's two go as they
// came.
void forward_request_headers(const request_head& client, head_writer& upstream,
                             std::string_view upstream_host, std::string_view request_id,
                             const upstream_credentials& credentials,
                             std::string_view traceparent = {}, std::string_view tracestate = {});

// A header field the proxy adds (name, value).
using named_value = std::pair<std::string, std::string>;

// Upstream response headers → the client response's fields, then the
// request id and `added`; without framing (the caller decides
// Content-Length or chunked). An upstream field named in `added` or in
// `replaced` (which the caller writes itself after these) is left out.
// Each forwarded field goes as the line the upstream wrote, consecutive
// ones in one copy.
void forward_response_headers(const response_head& upstream, head_writer& client,
                              std::string_view request_id, std::span<const named_value> added,
                              std::span<const std::string_view> replaced);

}  // namespace tokengate
