#include "io/write_all.hpp"

#include <boost/asio/write.hpp>

#include "io/any_stream.hpp"

namespace tokengate {

void unsent_part(std::span<const net::const_buffer> pieces, std::size_t sent,
                 std::vector<net::const_buffer>& rest) {
  rest.clear();
  for (const auto& piece : pieces) {
    if (sent >= piece.size())
      sent -= piece.size();
    else {
      rest.push_back(piece + sent);
      sent = 0;
    }
  }
}

net::awaitable<std::tuple<error_code, std::size_t>> write_all(
    any_stream& stream, std::span<const net::const_buffer> pieces) {
  error_code ec;
  auto sent = stream.send_now(pieces, ec);
  if (ec || sent == net::buffer_size(pieces)) co_return std::make_tuple(ec, sent);
  std::vector<net::const_buffer> rest;
  unsent_part(pieces, sent, rest);
  auto [wec, n] = co_await net::async_write(stream, rest, use_tuple);
  co_return std::make_tuple(wec, sent + n);
}

}  // namespace tokengate
