#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/parser.hpp>
#include <gtest/gtest.h>

#include "server/headers.hpp"

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

http::fields forwarded_request(const http::fields& client, std::string_view host, std::string_view id,
                               const upstream_credentials& credentials) {
  head_writer writer("POST", "/v1/chat/completions", 0);
  forward_request_headers(client, writer, host, id, credentials);
  return read_back<true>(std::move(writer));
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
  for (auto name : {"Connection", "X-Secret-Hop", "Keep-Alive", "Transfer-Encoding", "TE", "Upgrade",
                    "Proxy-Authorization"})
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

TEST(Headers, ClientCredentialsPassWhenTheUpstreamHasNoKey) {
  http::fields client;
  client.set(http::field::authorization, "Bearer client-key");
  auto upstream = forwarded_request(client, "h", "r", {});
  EXPECT_EQ(upstream[http::field::authorization], "Bearer client-key");
}

TEST(Headers, ResponseFramingIsOurs) {
  http::fields up;
  up.set(http::field::content_length, "12");
  up.set(http::field::transfer_encoding, "chunked");
  up.set(http::field::content_type, "text/event-stream");
  up.set("x-request-id", "upstream-id");
  up.set("openai-processing-ms", "12");
  head_writer writer(200, "OK", 0);
  forward_response_headers(up, writer, "ours", {}, {});
  auto client = read_back<false>(std::move(writer));
  EXPECT_EQ(client.find(http::field::content_length), client.end());
  EXPECT_EQ(client.find(http::field::transfer_encoding), client.end());
  EXPECT_EQ(client["x-request-id"], "ours");
  EXPECT_EQ(client["openai-processing-ms"], "12");
}

TEST(Headers, FieldsTheProxyAddsReplaceTheUpstreams) {
  http::fields up;
  up.set(http::field::cache_control, "max-age=60");
  up.set("X-Tokengate-Limit-Clamped", "from upstream");
  up.set(http::field::content_type, "text/event-stream");
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

}  // namespace
}  // namespace tokengate
