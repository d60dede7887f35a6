#include "http/headers.hpp"

#include <gtest/gtest.h>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/parser.hpp>

namespace tokengate {
namespace {

// The fields of a written head, as a parser reads them back.
template <bool isRequest>
http::fields read_back(head_writer writer) {
  auto text = std::move(writer).finish();
  http::parser<isRequest, http::empty_body> parser;
  error_code ec;
  parser.put(net::buffer(text), ec);
  EXPECT_FALSE(ec) << ec.message() << "\n" << text;
  EXPECT_TRUE(parser.is_header_done()) << text;
  return static_cast<const http::fields&>(parser.get());
}

// A client's head with these fields, as the session has it: parsed from
// its bytes.
request_head client_head(std::string lines) {
  std::string text = "POST /v1/chat/completions HTTP/1.1\r\n" + lines + "\r\n";
  request_head head;
  std::size_t used = 0;
  error_code ec;
  EXPECT_EQ(parse_request_head(text, head, used, ec), head_progress::done) << ec.message();
  return head;
}

http::fields forwarded_request(const request_head& client, std::string_view host,
                               std::string_view id, const upstream_credentials& credentials) {
  head_writer writer("POST", "/v1/chat/completions", 0);
  forward_request_headers(client, writer, host, id, credentials);
  return read_back<true>(std::move(writer));
}

// (Beast's fields keep the fields of one name together.)
http::fields forwarded_request(const http::fields& client, std::string_view host,
                               std::string_view id, const upstream_credentials& credentials) {
  std::string lines;
  for (const auto& f : client)
    lines.append(f.name_string()).append(": ").append(f.value()).append("\r\n");
  return forwarded_request(client_head(lines), host, id, credentials);
}

TEST(Headers, HopByHopAndConnectionNamedHeadersAreDropped) {
  http::fields client;
  client.set(http::field::connection, "keep-alive, X-Secret-Hop");
  client.set("X-Secret-Hop", "1");
  client.set(http::field::keep_alive, "timeout=5");
  client.set(http::field::transfer_encoding, "chunked");
  client.set(http::field::te, "trailers");
  client.set(http::field::upgrade, "h2c");
  client.set(http::field::proxy_authorization, "Basic abc");
  client.set(http::field::host, "evil.example");
  client.set(http::field::content_type, "application/json");
  client.set("OpenAI-Organization", "org-1");
  auto upstream = forwarded_request(client, "api.example:443", "rid-1", {});
  for (auto name : {"Connection", "X-Secret-Hop", "Keep-Alive", "Transfer-Encoding", "TE",
                    "Upgrade", "Proxy-Authorization"})
    EXPECT_EQ(upstream.find(name), upstream.end()) << name;
  EXPECT_EQ(upstream[http::field::host], "api.example:443");
  EXPECT_EQ(upstream[http::field::content_type], "application/json");
  EXPECT_EQ(upstream["OpenAI-Organization"], "org-1");
  EXPECT_EQ(upstream["x-request-id"], "rid-1");
  EXPECT_EQ(upstream[http::field::accept_encoding], "identity");
}

TEST(Headers, ClientCredentialsAreReplacedWhenTheUpstreamHasAKey) {
  http::fields client;
  client.set(http::field::authorization, "Bearer client-key");
  client.set("x-api-key", "client-key");
  upstream_credentials openai{upstream_credentials::style::bearer, "sk-upstream"};
  auto bearer = forwarded_request(client, "h", "r", openai);
  EXPECT_EQ(bearer[http::field::authorization], "Bearer sk-upstream");
  EXPECT_EQ(bearer.find("x-api-key"), bearer.end());

  upstream_credentials ant{upstream_credentials::style::x_api_key, "sk-ant"};
  auto anthropic = forwarded_request(client, "h", "r", ant);
  EXPECT_EQ(anthropic["x-api-key"], "sk-ant");
  EXPECT_EQ(anthropic.find(http::field::authorization), anthropic.end());
  EXPECT_EQ(anthropic["anthropic-version"], "2023-06-01");

  // The client's own API version is kept, and not sent twice.
  client.set("anthropic-version", "2024-01-01");
  auto versioned = forwarded_request(client, "h", "r", ant);
  EXPECT_EQ(versioned.count("anthropic-version"), 1u);
  EXPECT_EQ(versioned["anthropic-version"], "2024-01-01");
}

// A client's second Connection field, further down its head, names
// connection-only fields too, before it and after it.
TEST(Headers, EveryConnectionFieldOfTheClientCounts) {
  auto client = client_head(
      "Connection: x-first-hop\r\nContent-Type: application/json\r\nX-First-Hop: "
      "1\r\nX-Second-Hop: 2\r\n"
      "Connection: x-second-hop\r\nX-Kept: 3\r\n");
  auto upstream = forwarded_request(client, "h", "r", {});
  EXPECT_EQ(upstream.find("X-First-Hop"), upstream.end());
  EXPECT_EQ(upstream.find("X-Second-Hop"), upstream.end());
  EXPECT_EQ(upstream["X-Kept"], "3");
  EXPECT_EQ(upstream[http::field::content_type], "application/json");
}

TEST(Headers, ClientCredentialsPassWhenTheUpstreamHasNoKey) {
  http::fields client;
  client.set(http::field::authorization, "Bearer client-key");
  auto upstream = forwarded_request(client, "h", "r", {});
  EXPECT_EQ(upstream[http::field::authorization], "Bearer client-key");
}

// An upstream's head as the relay has it: parsed from its bytes.
response_head upstream_head(std::string text) {
  response_head head;
  std::size_t used = 0;
  error_code ec;
  EXPECT_EQ(parse_response_head(text, head, used, ec), head_progress::done) << ec.message();
  return head;
}

TEST(Headers, ResponseFramingIsOurs) {
  for (std::string framing : {"Content-Length: 12\r\n", "Transfer-Encoding: chunked\r\n"}) {
    auto up = upstream_head("HTTP/1.1 200 OK\r\n" + framing +
                            "Content-Type: text/event-stream\r\nx-request-id: upstream-id\r\n"
                            "openai-processing-ms: 12\r\n\r\n");
    head_writer writer(200, "OK", 0);
    forward_response_headers(up, writer, "ours", {}, {});
    auto client = read_back<false>(std::move(writer));
    EXPECT_EQ(client.find(http::field::content_length), client.end());
    EXPECT_EQ(client.find(http::field::transfer_encoding), client.end());
    EXPECT_EQ(client["x-request-id"], "ours");
    EXPECT_EQ(client.count("x-request-id"), 1u);
    EXPECT_EQ(client["openai-processing-ms"], "12");
    EXPECT_EQ(client[http::field::content_type], "text/event-stream");
  }
}

TEST(Headers, FieldsTheProxyAddsReplaceTheUpstreams) {
  auto up = upstream_head(
      "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nX-Tokengate-Limit-Clamped: from upstream\r\n"
      "Content-Type: text/event-stream\r\n\r\n");
  std::vector<named_value> added{{"x-tokengate-limit-clamped", "max_tokens 4096 -> 256"}};
  std::string_view replaced[] = {"Cache-Control"};
  head_writer writer(200, "OK", 0);
  forward_response_headers(up, writer, "ours", added, replaced);
  writer.field("Cache-Control", "no-cache");
  auto client = read_back<false>(std::move(writer));
  EXPECT_EQ(client.count(http::field::cache_control), 1u);
  EXPECT_EQ(client[http::field::cache_control], "no-cache");
  EXPECT_EQ(client.count("x-tokengate-limit-clamped"), 1u);
  EXPECT_EQ(client["x-tokengate-limit-clamped"], "max_tokens 4096 -> 256");
  EXPECT_EQ(client[http::field::content_type], "text/event-stream");
}

// Every hop-by-hop field and every field a Connection option names stays
// behind, wherever it stands; the rest keep their order, their repeats and
// their bytes (a cookie's value is forwarded as it came).
TEST(Headers, ResponseHopByHopFieldsStayBehindAndTheRestKeepTheirOrder) {
  auto up = upstream_head(
      "HTTP/1.1 200 OK\r\n"
      "Date: Wed, 02 Dec 2026 12:00:00 GMT\r\n"
      "Connection: keep-alive, X-Upstream-Hop\r\n"
      "Keep-Alive: timeout=5\r\n"
      "Set-Cookie: a=1; path=/\r\n"
      "x-upstream-hop: secret\r\n"
      "TE: trailers\r\nTrailer: x-t\r\nUpgrade: h2c\r\nProxy-Connection: close\r\n"
      "Proxy-Authenticate: Basic\r\n"
      "Set-Cookie: b=2;  path=/  \r\n"
      "Connection: x-second-hop\r\n"
      "X-Second-Hop: also\r\n"
      "CF-RAY: 8e01-AMS\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  head_writer writer(200, "OK", 0);
  forward_response_headers(up, writer, "ours", {}, {});
  auto text = std::move(writer).finish();
  EXPECT_EQ(text,
            "HTTP/1.1 200 OK\r\n"
            "Date: Wed, 02 Dec 2026 12:00:00 GMT\r\n"
            "Set-Cookie: a=1; path=/\r\n"
            "Set-Cookie: b=2;  path=/  \r\n"
            "CF-RAY: 8e01-AMS\r\n"
            "x-request-id: ours\r\n\r\n");
}

TEST(Headers, HopByHopNamesAreKnownInAnyCase) {
  for (auto name : {"connection", "Keep-Alive", "TE", "trailer", "Transfer-Encoding", "UPGRADE",
                    "proxy-connection", "Proxy-Authenticate", "proxy-authorization"})
    EXPECT_TRUE(is_hop_by_hop(std::string_view(name))) << name;
  for (auto name :
       {"content-type", "t", "tex", "trailers", "x-connection", "keep-alive-x", "set-cookie"})
    EXPECT_FALSE(is_hop_by_hop(std::string_view(name))) << name;
}

}  // namespace
}  // namespace tokengate
