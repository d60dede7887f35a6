#include <boost/beast/http/fields.hpp>
#include <gtest/gtest.h>

#include "server/headers.hpp"

namespace tokengate {
namespace {

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
  http::fields upstream;
  forward_request_headers(client, upstream, "api.example:443", "rid-1", {});
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
  http::fields bearer;
  upstream_credentials openai{upstream_credentials::style::bearer, "sk-upstream"};
  forward_request_headers(client, bearer, "h", "r", openai);
  EXPECT_EQ(bearer[http::field::authorization], "Bearer sk-upstream");
  EXPECT_EQ(bearer.find("x-api-key"), bearer.end());

  http::fields anthropic;
  upstream_credentials ant{upstream_credentials::style::x_api_key, "sk-ant"};
  forward_request_headers(client, anthropic, "h", "r", ant);
  EXPECT_EQ(anthropic["x-api-key"], "sk-ant");
  EXPECT_EQ(anthropic.find(http::field::authorization), anthropic.end());
  EXPECT_EQ(anthropic["anthropic-version"], "2023-06-01");
}

TEST(Headers, ClientCredentialsPassWhenTheUpstreamHasNoKey) {
  http::fields client;
  client.set(http::field::authorization, "Bearer client-key");
  http::fields upstream;
  forward_request_headers(client, upstream, "h", "r", {});
  EXPECT_EQ(upstream[http::field::authorization], "Bearer client-key");
}

TEST(Headers, ResponseFramingIsOurs) {
  http::fields up;
  up.set(http::field::content_length, "12");
  up.set(http::field::transfer_encoding, "chunked");
  up.set(http::field::content_type, "text/event-stream");
  up.set("x-request-id", "upstream-id");
  up.set("openai-processing-ms", "12");
  http::fields client;
  forward_response_headers(up, client, "ours");
  EXPECT_EQ(client.find(http::field::content_length), client.end());
  EXPECT_EQ(client.find(http::field::transfer_encoding), client.end());
  EXPECT_EQ(client["x-request-id"], "ours");
  EXPECT_EQ(client["openai-processing-ms"], "12");
}

}  // namespace
}  // namespace tokengate
