#pragma once
// Short names for the Boost namespaces used everywhere in tokengate.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace boost::beast {}
namespace boost::beast::http {}

namespace tokengate {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using error_code = boost::system::error_code;
}  // namespace tokengate
