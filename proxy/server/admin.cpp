#include "server/admin.hpp"

#include <openssl/crypto.h>

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
#include "server/admin_feed.hpp"
#include "server/status_page.hpp"

namespace tokengate {
namespace {

using admin_request = http::request<http::string_body>;
using admin_response = http::response<http::string_body>;

void json_answer(admin_response& res, http::status status, std::string body) {
  res.result(status);
  res.set(http::field::content_type, "application/json");
  res.body() = std::move(body);
}

// The bearer token, compared in constant time.
bool authorized(const admin_request& req, const std::string& token) {
  if (token.empty()) return true;
  auto given = req[http::field::authorization];
  const std::string expected = "Bearer " + token;
  return given.size() == expected.size() &&
         CRYPTO_memcmp(given.data(), expected.data(), expected.size()) == 0;
}

using feed_count = std::shared_ptr<std::atomic<std::size_t>>;

// The status page's files: no data in them, so no token needed to load
// them (the page then asks for it).
void page_answer(admin_response& res, const page_asset& asset) {
  res.set(http::field::content_type, content_type_of(asset));
  res.set("Content-Security-Policy", status_page_csp);
  res.set("Referrer-Policy", "no-referrer");
  res.set(http::field::cache_control, "no-cache");
  res.body() = std::string(asset.body);
}

// What /stats/stream gets when it may not start: a 503 once every feed is
// taken. Returns whether it may.
bool feed_admitted(admin_response& res, const feed_count& feeds) {
  if (feeds->load() < admin_listener::max_feeds) return true;
  res.set(http::field::retry_after, "5");
  json_answer(res, http::status::service_unavailable,
              json_error_body("every one of the " + std::to_string(admin_listener::max_feeds) +
                                  " /stats/stream feeds is taken; try again later",
                              "server_error", "too_many_feeds"));
  return false;
}

// Answers one request into `res`; returns whether it starts a feed instead
// (/stats/stream, admitted: `res` is then unused).
net::awaitable<bool> answer(const admin_request& req, admin_response& res,
                            const admin_handlers& handlers, const feed_count& feeds) {
  auto target = std::string_view(req.target());
  auto path = target.substr(0, target.find('?'));
  const bool probe = path == "/healthz" || path == "/readyz";
  res.set("X-Content-Type-Options", "nosniff");
  if (req.method() != http::verb::get && req.method() != http::verb::head) {
    json_answer(res, http::status::method_not_allowed,
                json_error_body("admin endpoints accept GET only", "invalid_request_error",
                                "method_not_allowed"));
  } else if (const auto* asset = find_page_asset(path)) {
    page_answer(res, *asset);
  } else if (!probe && !authorized(req, handlers.token)) {
    res.set(http::field::www_authenticate, "Bearer");
    json_answer(res, http::status::unauthorized,
                json_error_body("this admin endpoint needs Authorization: Bearer <admin.token>",
                                "invalid_request_error", "invalid_api_key"));
  } else if (path == "/healthz") {
    res.set(http::field::content_type, "text/plain");
    res.body() = "ok\n";
  } else if (path == "/readyz") {
    bool ready = handlers.ready();
    res.result(ready ? http::status::ok : http::status::service_unavailable);
    res.set(http::field::content_type, "text/plain");
    res.body() = ready ? "ready\n" : "not ready\n";
  } else if (path == "/stats/stream" && req.method() == http::verb::get) {
    co_return feed_admitted(res, feeds);
  } else if (path == "/stats") {
    json_answer(res, http::status::ok, handlers.stats_json());
  } else if (path == "/budgets" && handlers.budgets_json) {
    json_answer(res, http::status::ok, co_await handlers.budgets_json());
  } else if (path == "/metrics") {
    res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    res.body() = handlers.metrics_text();
  } else {
    json_answer(res, http::status::not_found,
                json_error_body("unknown admin path " + std::string(path), "invalid_request_error",
                                "unknown_url"));
  }
  co_return false;
}

// A feed's place, taken for as long as it runs.
net::awaitable<void> feed(beast::tcp_stream& stream, const admin_handlers& handlers,
                          feed_count feeds) {
  feeds->fetch_add(1);
  struct give_back {
    feed_count& feeds;
    ~give_back() { feeds->fetch_sub(1); }
  } place{feeds};
  co_await run_stats_feed(stream, handlers.stats_json);
}

net::awaitable<void> admin_session(beast::tcp_stream stream, const admin_handlers& handlers,
                                   feed_count feeds) {
  beast::flat_buffer buffer;
  for (;;) {
    admin_request req;
    stream.expires_after(std::chrono::seconds(30));
    auto [ec, n] = co_await http::async_read(stream, buffer, req, use_tuple);
    if (ec) break;
    admin_response res{http::status::ok, 11};
    if (co_await answer(req, res, handlers, feeds)) {
      co_await feed(stream, handlers, feeds);
      break;
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
                  admin_session(beast::tcp_stream(std::move(socket)), handlers_, feeds_),
                  net::detached);
  }
}

}  // namespace tokengate
