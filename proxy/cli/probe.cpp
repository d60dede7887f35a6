#include "cli/probe.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/url/parse.hpp>
#include <iostream>
#include <memory>

#include "http/head_bytes.hpp"
#include "io/net.hpp"

namespace tokengate::cli {

int probe(const std::string& url, std::chrono::milliseconds timeout) {
  auto parsed = boost::urls::parse_absolute_uri(url);
  if (!parsed || parsed->scheme() != "http" || parsed->host().empty()) {
    std::cerr << "tokengate probe: expected http://HOST:PORT/PATH, got '" << url << "'\n";
    return 2;
  }
  std::string host = parsed->host();
  std::string port = parsed->has_port() ? std::string(parsed->port()) : "80";
  std::string target =
      parsed->encoded_target().empty() ? "/" : std::string(parsed->encoded_target());

  net::io_context io;
  beast::tcp_stream stream(io);
  tcp::resolver resolver(io);
  http::response<http::string_body> response;
  error_code failure;
  stream.expires_after(timeout);  // one deadline for resolve, connect, write and read
  resolver.async_resolve(host, port, [&](error_code ec, tcp::resolver::results_type endpoints) {
    if (ec) return void(failure = ec);
    stream.async_connect(endpoints, [&](error_code ec, const tcp::endpoint&) {
      if (ec) return void(failure = ec);
      http::request<http::empty_body> request{http::verb::get, target, 11};
      request.set(http::field::host, host);
      request.set(http::field::user_agent, "tokengate-probe");
      auto head = std::make_shared<std::string>(head_bytes(request.base()));
      net::async_write(stream, net::buffer(*head), [&, head](error_code ec, std::size_t) {
        if (ec) return void(failure = ec);
        auto buffer = std::make_shared<beast::flat_buffer>();
        http::async_read(stream, *buffer, response,
                         [&, buffer](error_code ec, std::size_t) { failure = ec; });
      });
    });
  });
  io.run();
  if (failure) {
    std::cerr << "tokengate probe: " << url << ": " << failure.message() << '\n';
    return 1;
  }
  unsigned status = response.result_int();
  std::cout << status << ' ' << response.body() << (response.body().ends_with('\n') ? "" : "\n");
  return status >= 200 && status < 300 ? 0 : 1;
}

}  // namespace tokengate::cli
