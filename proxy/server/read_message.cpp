#include "server/read_message.hpp"

#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http/error.hpp>

#include <algorithm>

#include "server/any_stream.hpp"

namespace tokengate {

template <bool isRequest>
net::awaitable<error_code> read_message(any_stream& stream, beast::flat_buffer& buffer,
                                        http::basic_parser<isRequest>& parser, bool whole) {
  parser.eager(whole);  // (as Beast's async_read and async_read_header set it)
  auto done = [&] { return whole ? parser.is_done() : parser.is_header_done(); };
  while (!done()) {
    if (buffer.size() > 0) {
      error_code ec;
      auto used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (!ec && used > 0) continue;  // an element parsed: done, or parse on
      if (ec && ec != http::error::need_more) co_return ec;
    }
    auto size = beast::read_size(buffer, 65536);
    if (size == 0) co_return http::error::buffer_overflow;
    auto into = buffer.prepare(size);
    error_code ec;
    std::size_t n = 0;
    if (!stream.read_now(into, ec, n)) std::tie(ec, n) = co_await stream.async_read_some(into, use_tuple);
    buffer.commit(n);
    if (ec == net::error::eof) {
      // Nothing at all: the peer simply closed. Part of a message: the
      // parser decides (a body that runs to the close ends here; anything
      // else is a partial message).
      if (!parser.got_some()) co_return http::error::end_of_stream;
      error_code eof_ec;
      parser.put_eof(eof_ec);
      co_return eof_ec;
    }
    if (ec) co_return ec;
  }
  co_return error_code{};
}

net::awaitable<error_code> read_response_head(any_stream& stream, beast::flat_buffer& buffer,
                                              upstream::response_head& head, std::size_t limit) {
  for (;;) {
    if (buffer.size() > 0) {
      auto bytes = buffer.data();
      std::span<char> text(static_cast<char*>(bytes.data()), std::min(bytes.size(), limit));
      std::size_t used = 0;
      error_code ec;
      auto progress = upstream::parse_response_head(text, head, used, ec);
      if (progress == head_progress::done) {
        buffer.consume(used);
        co_return error_code{};
      }
      if (progress == head_progress::failed) co_return ec;
      if (bytes.size() >= limit) co_return http::error::header_limit;
    }
    // Room for a hosted provider's head (a kilobyte or two) in one read, as
    // nginx's 4 KiB: Beast's sizing gives an empty buffer 512 bytes, and
    // such a head took three reads (callgrind, the demo engine's
    // provider_head).
    constexpr std::size_t head_read_room = 4096;
    auto into = buffer.prepare(std::max(beast::read_size(buffer, 65536), head_read_room));
    error_code ec;
    std::size_t n = 0;
    if (!stream.read_now(into, ec, n)) std::tie(ec, n) = co_await stream.async_read_some(into, use_tuple);
    buffer.commit(n);
    // (As Beast's parser says it: nothing at all, or part of a head.)
    if (ec == net::error::eof) co_return buffer.size() == 0 ? http::error::end_of_stream : http::error::partial_message;
    if (ec) co_return ec;
  }
}

template net::awaitable<error_code> read_message<true>(any_stream&, beast::flat_buffer&, http::basic_parser<true>&,
                                                       bool);
template net::awaitable<error_code> read_message<false>(any_stream&, beast::flat_buffer&, http::basic_parser<false>&,
                                                        bool);

}  // namespace tokengate
