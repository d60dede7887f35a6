#pragma once
// How a relayed answer is framed for the client: the head it gets (the
// upstream's status and end-to-end fields, then ours), and the pieces of
// one write as one HTTP chunk when its body is chunked.
#include <array>
#include <boost/beast/core/flat_buffer.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/request_context.hpp"
#include "http/response_head.hpp"
#include "io/net.hpp"

namespace tokengate::stream {

// The client's head: the upstream's status and end-to-end fields, then
// `extra` (the plan's, e.g. the clamp notice), the streaming ones and the
// framing, which replace any the upstream sent of the same name.
std::string client_head(const response_head& head,
                        const std::vector<std::pair<std::string, std::string>>& extra,
                        const request_context& ctx,
                        const std::optional<std::uint64_t>& content_length, bool chunked,
                        bool keep_alive);

// The size line of an HTTP chunk of `size` bytes, written into `line`.
using chunk_line = std::array<char, 24>;
net::const_buffer chunk_size_line(std::size_t size, chunk_line& line);

// Bytes framed as one HTTP chunk: size line, bytes, CRLF. `line` holds the
// size line and must outlive the pieces.
std::array<net::const_buffer, 3> as_chunk(std::string_view bytes, chunk_line& line);

inline const net::const_buffer last_chunk("0\r\n\r\n", 5);

// The head was read with room for a provider's (4 KiB); a stream keeps its
// buffer for its whole life, and a slow one's should stay at the 512 bytes
// its events need: 9,000 streams held 18.4 KB each instead of 15.2. What
// the head's read left moves into a buffer of its own size, at least 512
// bytes (an allocation a request); a fast stream's grows again as its
// reads find more waiting.
void keep_small(beast::flat_buffer& buffer);

}  // namespace tokengate::stream
