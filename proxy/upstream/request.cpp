#include "upstream/request.hpp"

#include <charconv>

#include "http/head_bytes.hpp"
#include "http/headers.hpp"
#include "http/request_context.hpp"
#include "upstream/pool.hpp"

namespace tokengate {
namespace {

upstream_credentials credentials_for(const config::upstream& u) {
  upstream_credentials c;
  // (Anthropic's API wants its version on every request: a translated one
  // gets it even when the client's own key goes through.)
  c.anthropic_version_needed = u.kind == config::provider_kind::anthropic;
  if (u.api_key.empty()) return c;
  c.how = u.kind == config::provider_kind::anthropic ? upstream_credentials::style::x_api_key
                                                     : upstream_credentials::style::bearer;
  c.key = u.api_key;
  return c;
}

// The upstream's parent: the attempt's client span (the server span's
// when the body went before any attempt began).
std::string traceparent_for(const request_context& ctx) {
  if (!ctx.trace.active) return {};
  const auto& parent = ctx.attempt_spans.empty() ? ctx.trace.span : ctx.attempt_spans.back().id;
  return format_traceparent(ctx.trace.trace, parent, ctx.trace.sampled);
}

}  // namespace

std::vector<net::const_buffer> upstream_request(
    const client_request& request, const upstream::pool& pool, const config::upstream& settings,
    const request_context& ctx, const std::vector<upstream::splice>& edits,
    std::string_view target_override, std::string& head) {
  std::vector<net::const_buffer> pieces;
  pieces.reserve(2 * edits.size() + 2);  // the head, then the body's pieces
  pieces.emplace_back();
  upstream::body_pieces(body_text(request), edits, pieces);
  auto body_size = net::buffer_size(pieces);
  // (Room for the fields we add: host, request id, a key, the length.)
  const auto& client = request.head;
  auto target = pool.url().upstream_path(target_override.empty() ? client.target : target_override);
  head_writer writer(client.method_string, target,
                     client.bytes.size() + 256 + settings.api_key.size());
  forward_request_headers(client, writer, pool.url().host_header, ctx.request_id,
                          credentials_for(settings), traceparent_for(ctx), ctx.trace.tracestate);
  // As Beast frames a request body: a length when there is a body, or when
  // the method is one that carries one; none otherwise. The upstream
  // connection is kept alive (HTTP/1.1's default: no Connection field).
  auto verb = client.method;
  if (body_size > 0 || verb == http::verb::post || verb == http::verb::put ||
      verb == http::verb::options) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, body_size).ptr;
    writer.field("Content-Length",
                 std::string_view(digits, static_cast<std::size_t>(end - digits)));
  }
  head = std::move(writer).finish();
  pieces.front() = net::const_buffer(head.data(), head.size());
  return pieces;
}

}  // namespace tokengate
