#pragma once
// Short names for the Boost namespaces used everywhere in tokengate.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace boost::beast {}
namespace boost::beast::http {}

namespace tokengate {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using error_code = boost::system::error_code;

// The completion token of every coroutine's I/O: errors come back as values
// (`auto [ec, n] = co_await op(use_tuple)`), never as exceptions.
inline constexpr auto use_tuple = net::as_tuple(net::use_awaitable);
}  // namespace tokengate
