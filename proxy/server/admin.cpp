#include "server/admin.hpp"

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <stdexcept>

#include "http/head_bytes.hpp"
#include "http/json_error.hpp"

namespace tokengate {
namespace {

net::awaitable<void> admin_session(beast::tcp_stream stream, const admin_handlers& handlers) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    stream.expires_after(std::chrono::seconds(30));
    auto [ec, n] = co_await http::async_read(stream, buffer, req, use_tuple);
    if (ec) break;
    http::response<http::string_body> res{http::status::ok, 11};
    auto target = std::string_view(req.target());
    auto path = target.substr(0, target.find('?'));
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res.result(http::status::method_not_allowed);
      res.set(http::field::content_type, "application/json");
      res.body() = json_error_body("admin endpoints accept GET only", "invalid_request_error",
                                   "method_not_allowed");
    } else if (path == "/healthz") {
      res.set(http::field::content_type, "text/plain");
      res.body() = "ok\n";
    } else if (path == "/readyz") {
      bool ready = handlers.ready();
      res.result(ready ? http::status::ok : http::status::service_unavailable);
      res.set(http::field::content_type, "text/plain");
      res.body() = ready ? "ready\n" : "not ready\n";
    } else if (path == "/stats") {
      res.set(http::field::content_type, "application/json");
      res.body() = handlers.stats_json();
    } else if (path == "/metrics") {
      res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = handlers.metrics_text();
    } else {
      res.result(http::status::not_found);
      res.set(http::field::content_type, "application/json");
      res.body() = json_error_body("unknown admin path " + std::string(path),
                                   "invalid_request_error", "unknown_url");
    }
    res.keep_alive(req.keep_alive());
    res.content_length(res.body().size());
    // The head and the body in one write; a HEAD request gets the head only.
    const auto head = head_bytes(res.base());
    std::array<net::const_buffer, 2> pieces{net::buffer(head), net::buffer(res.body())};
    if (req.method() == http::verb::head) pieces[1] = {};
    auto [wec, wn] = co_await net::async_write(stream, pieces, use_tuple);
    if (wec || !req.keep_alive()) break;
  }
  error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
}

}  // namespace

admin_listener::admin_listener(net::io_context& io, const std::string& address, std::uint16_t port,
                               admin_handlers handlers)
    : acceptor_(io), handlers_(std::move(handlers)) {
  tcp::endpoint endpoint(net::ip::make_address(address), port);
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  // Like the proxy listeners: a new process can start beside a draining one
  // (a binary upgrade without a gap, docs/operations.md).
  acceptor_.set_option(net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>(true));
  error_code ec;
  acceptor_.bind(endpoint, ec);
  if (ec)
    throw std::runtime_error("cannot listen on " + address + ":" + std::to_string(port) +
                             " (admin): " + ec.message());
  acceptor_.listen();
  port_ = acceptor_.local_endpoint().port();
}

void admin_listener::start() {
  net::co_spawn(acceptor_.get_executor(), accept_loop(), net::detached);
}

void admin_listener::stop() {
  error_code ignored;
  acceptor_.close(ignored);
}

net::awaitable<void> admin_listener::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
    if (ec) {
      if (!acceptor_.is_open()) co_return;
      continue;
    }
    net::co_spawn(acceptor_.get_executor(),
                  admin_session(beast::tcp_stream(std::move(socket)), handlers_), net::detached);
  }
}

}  // namespace tokengate
