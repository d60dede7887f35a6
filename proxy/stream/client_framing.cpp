#include "stream/client_framing.hpp"

#include <algorithm>
#include <boost/beast/http/status.hpp>
#include <charconv>
#include <span>

#include "http/head_bytes.hpp"
#include "http/headers.hpp"

namespace tokengate::stream {

std::string client_head(const response_head& head,
                        const std::vector<std::pair<std::string, std::string>>& extra,
                        const request_context& ctx,
                        const std::optional<std::uint64_t>& content_length, bool chunked,
                        bool keep_alive) {
  auto status = http::int_to_status(head.status);
  // (A code of the upstream's own keeps its own reason phrase.)
  std::string_view reason = status == http::status::unknown
                                ? head.reason
                                : std::string_view(http::obsolete_reason(status));
  head_writer out(head.status, reason, head.bytes.size() + 160);
  static constexpr std::array<std::string_view, 2> streaming_fields{"Cache-Control",
                                                                    "X-Accel-Buffering"};
  forward_response_headers(head, out, ctx.request_id, extra,
                           ctx.streamed ? std::span<const std::string_view>(streaming_fields)
                                        : std::span<const std::string_view>());
  if (ctx.streamed) {
    out.field("Cache-Control", "no-cache");
    out.field("X-Accel-Buffering", "no");  // tells an nginx in front not to buffer either
  }
  if (content_length) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, *content_length).ptr;
    out.field("Content-Length", std::string_view(digits, static_cast<std::size_t>(end - digits)));
  } else if (chunked) {
    out.field("Transfer-Encoding", "chunked");
  }
  if (!keep_alive) out.field("Connection", "close");
  return std::move(out).finish();
}

net::const_buffer chunk_size_line(std::size_t size, chunk_line& line) {
  auto end = std::to_chars(line.data(), line.data() + 16, size, 16).ptr;
  *end++ = '\r';
  *end++ = '\n';
  return {line.data(), static_cast<std::size_t>(end - line.data())};
}

std::array<net::const_buffer, 3> as_chunk(std::string_view bytes, chunk_line& line) {
  return {chunk_size_line(bytes.size(), line), net::const_buffer(bytes.data(), bytes.size()),
          net::const_buffer("\r\n", 2)};
}

void keep_small(beast::flat_buffer& buffer) {
  constexpr std::size_t small = 512;
  const std::size_t needed = std::max(small, buffer.size());
  if (buffer.capacity() <= needed) return;
  beast::flat_buffer kept;
  kept.reserve(needed);
  kept.commit(net::buffer_copy(kept.prepare(buffer.size()), buffer.data()));
  buffer = std::move(kept);
}

}  // namespace tokengate::stream
