#include "server/admin_feed.hpp"

#include <array>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>

namespace tokengate {
namespace {

using steady = std::chrono::steady_clock;

// (A reader that stops reading is given this long for each write, then
// dropped: a feed must not hold the admin thread's memory for it.)
constexpr auto write_timeout = std::chrono::seconds(10);

// No length: the body runs until either side closes (HTTP/1.1, RFC 9112
// 6.3), which is what an event stream does. `retry:` tells EventSource how
// soon to come back after a drop; the page's own reader reads it too.
constexpr std::string_view feed_head =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: text/event-stream\r\n"
    "Cache-Control: no-store\r\n"
    "X-Accel-Buffering: no\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "Connection: close\r\n"
    "\r\n"
    "retry: 2000\n\n";

net::awaitable<bool> write(beast::tcp_stream& stream, std::string_view bytes) {
  stream.expires_after(write_timeout);
  auto [ec, n] = co_await net::async_write(stream, net::buffer(bytes), use_tuple);
  co_return !ec;
}

}  // namespace

net::awaitable<void> run_stats_feed(beast::tcp_stream& stream,
                                    const std::function<std::string()>& snapshot) {
  using namespace net::experimental::awaitable_operators;
  if (!co_await write(stream, feed_head)) co_return;
  net::steady_timer tick(stream.get_executor());
  std::array<char, 256> ignored;
  auto next = steady::now();
  for (;;) {
    // (/stats is one line: serialized JSON holds no newline.)
    const auto event = "data: " + snapshot() + "\n\n";
    if (!co_await write(stream, event)) co_return;
    stream.expires_never();
    // Once a second from the first, unless a write took longer.
    next = std::max(next + std::chrono::seconds(1), steady::now());
    tick.expires_at(next);
    // The client's close (or anything it sends: an event stream's client
    // sends nothing) ends the feed at once rather than at the next write.
    auto woke = co_await (tick.async_wait(use_tuple) ||
                          stream.socket().async_read_some(net::buffer(ignored), use_tuple));
    if (woke.index() == 1) co_return;
  }
}

}  // namespace tokengate
