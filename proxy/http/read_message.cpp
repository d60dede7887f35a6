#include "http/read_message.hpp"

#include <algorithm>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http/error.hpp>

#include "http/chunked_body.hpp"
#include "io/any_stream.hpp"

namespace tokengate {
namespace {

// Reads into `buffer` what the stream has: at once when it has something,
// otherwise when it comes. (As Beast's parser says it: nothing at all, or
// part of a message.)
net::awaitable<error_code> read_more(any_stream& stream, beast::flat_buffer& buffer,
                                     std::size_t room) {
  auto into = buffer.prepare(room);
  error_code ec;
  std::size_t n = 0;
  if (!stream.read_now(into, ec, n))
    std::tie(ec, n) = co_await stream.async_read_some(into, use_tuple);
  buffer.commit(n);
  if (ec == net::error::eof)
    co_return buffer.size() == 0 ? http::error::end_of_stream : http::error::partial_message;
  co_return ec;
}

// Room for a hosted provider's head (a kilobyte or two) or the OpenAI
// SDK's request head in one read, as nginx's 4 KiB: Beast's sizing gives an
// empty buffer 512 bytes, and such a head took three reads (callgrind, the
// demo engine's provider_head).
constexpr std::size_t head_read_room = 4096;

// A head's first bytes are parsed as they come, so that what cannot begin
// a message is refused at once; past these, only once its blank line has
// come. Parsed again from its start at every read, a head sent a few bytes
// a packet up to the 16 KiB limit cost a scan of the whole of it each time
// (a slow client's cheapest way to make the proxy work). (Above a request
// of the OpenAI SDK's, head and body, which then needs no search here
// besides the parser's own.)
constexpr std::size_t parsed_as_they_come = 2048;

// `parse(text, used, ec)` is a head parser's call (head_progress);
// `interim()`, asked once a head is parsed, says whether it is to be passed
// over for the one after it.
template <typename Parse, typename Interim>
net::awaitable<error_code> read_head(any_stream& stream, beast::flat_buffer& buffer,
                                     std::size_t limit, Parse parse, Interim interim) {
  std::size_t searched = 0;  // the first bytes, known to hold no blank line
  for (;;) {
    if (buffer.size() > 0) {
      auto bytes = buffer.data();
      std::span<char> text(static_cast<char*>(bytes.data()), std::min(bytes.size(), limit));
      const std::string_view seen(text.data(), text.size());
      const bool may_end =
          seen.size() <= parsed_as_they_come ||
          seen.find("\r\n\r\n", searched > 3 ? searched - 3 : 0) != std::string_view::npos;
      searched = seen.size();
      if (may_end) {
        std::size_t used = 0;
        error_code ec;
        auto progress = parse(text, used, ec);
        if (progress == head_progress::done) {
          buffer.consume(used);
          if (!interim()) co_return error_code{};
          searched = 0;
          continue;
        }
        if (progress == head_progress::failed) co_return ec;
      }
      if (bytes.size() >= limit) co_return http::error::header_limit;
    }
    if (auto ec = co_await read_more(stream, buffer,
                                     std::max(beast::read_size(buffer, 65536), head_read_room)))
      co_return ec;
  }
}

}  // namespace

net::awaitable<error_code> read_request_head(any_stream& stream, beast::flat_buffer& buffer,
                                             request_head& head, std::size_t limit,
                                             std::size_t max_fields) {
  return read_head(
      stream, buffer, limit,
      [&head, max_fields](std::span<char> text, std::size_t& used, error_code& ec) {
        return parse_request_head(text, head, used, ec, max_fields);
      },
      [] { return false; });
}

net::awaitable<error_code> read_response_head(any_stream& stream, beast::flat_buffer& buffer,
                                              response_head& head, std::size_t limit) {
  // (The lambdas are copied into read_head's frame: the count lives there.)
  return read_head(
      stream, buffer, limit,
      [&head, interim_answers = std::size_t{0}](std::span<char> text, std::size_t& used,
                                                error_code& ec) mutable {
        auto progress = parse_response_head(text, head, used, ec);
        if (progress != head_progress::done || head.status / 100 != 1) return progress;
        // 101 would switch the connection to another protocol, which the
        // proxy never asks for (it forwards no Upgrade).
        if (head.status == 101 || ++interim_answers > max_interim_answers) {
          ec = http::error::bad_status;
          return head_progress::failed;
        }
        return progress;
      },
      [&head] { return head.status / 100 == 1; });
}

net::awaitable<error_code> read_chunked_body(any_stream& stream, beast::flat_buffer& buffer,
                                             body_bytes& body, std::size_t limit) {
  auto decoder = body_decoder::chunked();
  for (;;) {
    if (buffer.size() > 0) {
      auto bytes = buffer.data();
      error_code ec;
      buffer.consume(take_chunks(decoder, std::span(static_cast<char*>(bytes.data()), bytes.size()),
                                 body, limit, ec));
      if (ec) co_return ec;
      if (decoder.done()) co_return error_code{};
    }
    if (auto ec = co_await read_more(stream, buffer, beast::read_size(buffer, 65536)))
      co_return ec == http::error::end_of_stream ? http::error::partial_message : ec;
  }
}

}  // namespace tokengate
