#include "server/upstream_request.hpp"

#include "server/head_bytes.hpp"
#include "server/headers.hpp"
#include "server/request_context.hpp"
#include "upstream/pieces_body.hpp"
#include "upstream/pool.hpp"

namespace tokengate {
namespace {

upstream_credentials credentials_for(const config::upstream& u) {
  upstream_credentials c;
  if (u.api_key.empty()) return c;
  c.how = u.kind == config::provider_kind::anthropic ? upstream_credentials::style::x_api_key
                                                      : upstream_credentials::style::bearer;
  c.key = u.api_key;
  return c;
}

// `body` with the (sorted) edits applied, as pieces pointing into both.
void body_pieces(std::string_view body, const std::vector<routing::splice>& edits,
                 std::vector<net::const_buffer>& pieces) {
  std::size_t at = 0;
  for (const auto& e : edits) {
    pieces.emplace_back(body.data() + at, e.begin - at);
    pieces.emplace_back(e.replacement.data(), e.replacement.size());
    at = e.end;
  }
  pieces.emplace_back(body.data() + at, body.size() - at);
}

}  // namespace

std::vector<net::const_buffer> upstream_request(const client_request& request, const upstream::pool& pool,
                                                const config::upstream& settings, const request_context& ctx,
                                                const std::vector<routing::splice>& edits, std::string& head) {
  http::request<upstream::pieces_body> up{request.method(), pool.url().upstream_path(request.target()), 11};
  forward_request_headers(request.base(), up.base(), pool.url().host_header, ctx.request_id,
                          credentials_for(settings));
  up.body().reserve(2 * edits.size() + 2);  // the body's pieces, and room for the head in front
  body_pieces(body_text(request), edits, up.body());
  up.prepare_payload();
  up.keep_alive(true);
  head = head_bytes(up.base());
  auto pieces = std::move(up.body());
  pieces.insert(pieces.begin(), net::const_buffer(head.data(), head.size()));
  return pieces;
}

}  // namespace tokengate
