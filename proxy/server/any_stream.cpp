#include "server/any_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/error.hpp>

namespace tokengate {

net::awaitable<void> any_stream::graceful_close() {
  if (tls_) {
    tcp().expires_after(std::chrono::seconds(2));
    co_await tls_->async_shutdown(net::as_tuple(net::use_awaitable));
  }
  error_code ignored;
  tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
  tcp().close();
}

bool is_disconnect(const error_code& ec) {
  return ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == net::error::operation_aborted ||
         ec == net::error::bad_descriptor || ec == net::ssl::error::stream_truncated ||
         ec == http::error::end_of_stream || ec == beast::error::timeout;
}

}  // namespace tokengate
