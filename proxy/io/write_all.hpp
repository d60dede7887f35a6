#pragma once
// Writing a scatter sequence whole: to the kernel at once where the socket
// takes it, the rest in an asynchronous write.
#include <span>
#include <tuple>
#include <vector>

#include "io/net.hpp"

namespace tokengate {

class any_stream;

// The part of `pieces` after the first `sent` bytes, into `rest`.
void unsent_part(std::span<const net::const_buffer> pieces, std::size_t sent,
                 std::vector<net::const_buffer>& rest);

// Writes all of `pieces`: at once when the kernel takes them (plain TCP),
// the rest in an asynchronous write under the stream's own deadline
// (the stream's expires_after, set by the caller). The error, and the bytes written.
net::awaitable<std::tuple<error_code, std::size_t>> write_all(
    any_stream& stream, std::span<const net::const_buffer> pieces);

}  // namespace tokengate
