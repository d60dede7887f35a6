// Hostile clients (issue #6): each gets the right 4xx or a close, quickly,
// nothing reaches the engine, and the proxy goes on serving others.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

fixture_options strict() {
  fixture_options o;
  o.top_extra =
      "limits:\n"
      "  max_body_bytes: 4096\n"
      "  max_head_bytes: 8192\n"
      "  head_timeout: 300ms\n"
      "  body_timeout: 300ms\n"
      "routes:\n"
      "  - models: [demo]\n"
      "    targets: [{upstream: demo}]\n"
      "    max_output_tokens: {ceiling: 1000, mode: clamp}\n";
  return o;
}

// Sends raw bytes on a fresh connection; returns the response (status 0 if
// the proxy closed without one) and how long it took.
struct outcome {
  http_response response;
  bool closed;
  std::chrono::milliseconds took;
};
outcome send_raw(proxy_fixture& f, const std::string& bytes) {
  http_client c(f.port());
  auto start = clock::now();
  c.send(bytes);
  auto r = read_response(c, 5s);
  return {r, c.eof(), std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start)};
}

// After each hostile input, a normal request on a new connection works.
void still_serving(proxy_fixture& f) {
  http_client c(f.port());
  c.send(
      post_json("/v1/chat/completions", R"({"model":"demo","max_tokens":1,"demo":{"ttft_ms":0}})"));
  EXPECT_EQ(read_response(c).status, 200);
}

std::string head(const std::string& target, const std::string& headers) {
  return "POST " + target + " HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n" +
         headers + "\r\n";
}

TEST(Hostile, FramingAttacksAre400AndNeverReachTheEngine) {
  proxy_fixture f(strict());
  const std::string body = R"({"model":"demo","max_tokens":1})";
  struct attack {
    const char* name;
    std::string bytes;
  };
  std::vector<attack> attacks = {
      {"Content-Length and Transfer-Encoding (smuggling)",
       head("/v1/chat/completions", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n") +
           "0\r\n\r\n"},
      {"two different Content-Lengths",
       head("/v1/chat/completions", "Content-Length: 3\r\nContent-Length: 30\r\n") + body},
      {"negative Content-Length", head("/v1/chat/completions", "Content-Length: -1\r\n") + body},
      {"overflowing Content-Length",
       head("/v1/chat/completions", "Content-Length: 184467440737095516160\r\n") + body},
      {"invalid chunk size", head("/v1/chat/completions", "Transfer-Encoding: chunked\r\n") +
                                 "zz\r\n" + body + "\r\n0\r\n\r\n"},
      {"chunk size overflow", head("/v1/chat/completions", "Transfer-Encoding: chunked\r\n") +
                                  "fffffffffffffffff\r\nx\r\n"},
      {"unknown transfer coding",
       head("/v1/chat/completions", "Transfer-Encoding: gzip, chunked\r\n") + "0\r\n\r\n"},
      {"NUL in the head",
       "POST /v1/chat/completions HTTP/1.1\r\nHost: a\0b\r\nContent-Length: 2\r\n\r\n{}"},
  };
  for (auto& a : attacks) {
    auto before = f.engine_stats().requests.load();
    auto o = send_raw(f, a.bytes);
    EXPECT_EQ(f.engine_stats().requests.load(), before) << a.name << " reached the engine";
    EXPECT_TRUE(o.response.status == 400 || (o.response.status == 0 && o.closed))
        << a.name << ": " << o.response.status;
    if (o.response.status) {
      EXPECT_NE(o.response.body.find("\"error\""), std::string::npos) << a.name;
    }
    EXPECT_LT(o.took, 1s) << a.name;
  }
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
  still_serving(f);
}

TEST(Hostile, AMegabyteHeaderLineIs431) {
  proxy_fixture f(strict());
  auto o = send_raw(f, head("/v1/chat/completions",
                            "X-Long: " + std::string(1 << 20, 'a') + "\r\nContent-Length: 2\r\n") +
                           "{}");
  EXPECT_EQ(o.response.status, 431);
  EXPECT_LT(o.took, 2s);
  still_serving(f);
}

// A client still sending when it is answered (its declared body is over
// the limit) must get to read the answer: the proxy reads and drops the
// rest instead of closing on unread bytes, which resets the connection
// and fails the client's send before it ever reads the 413.
TEST(Hostile, AClientStillSendingAnOversizedBodyReadsItsAnswer) {
  proxy_fixture f(strict());
  constexpr std::size_t body = 32 << 20;  // far more than the sockets' buffers hold
  http_client c(f.port());
  c.send(head("/v1/chat/completions", "Content-Length: " + std::to_string(body) + "\r\n"));
  EXPECT_NO_THROW(c.send(std::string(body, 'x')))
      << "the proxy stopped reading and reset the connection";
  auto r = read_response(c, 5s);
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("request_too_large"), std::string::npos) << r.body;
  EXPECT_FALSE(c.read_some(2s));
  EXPECT_TRUE(c.eof()) << "the connection ends after the answer";
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
  still_serving(f);
}

TEST(Hostile, UndeclaredOversizedChunkedBodyIs413) {
  proxy_fixture f(strict());
  std::string chunk(3000, 'x');
  std::string bytes = head("/v1/chat/completions", "Transfer-Encoding: chunked\r\n");
  for (int i = 0; i < 3; ++i) bytes += "bb8\r\n" + chunk + "\r\n";  // 0xbb8 = 3000
  bytes += "0\r\n\r\n";
  auto o = send_raw(f, bytes);
  EXPECT_EQ(o.response.status, 413);
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
}

TEST(Hostile, SlowBodyIsCutOff) {
  proxy_fixture f(strict());
  http_client c(f.port());
  auto start = clock::now();
  c.send(head("/v1/chat/completions", "Content-Length: 100\r\n") + R"({"model":)");  // then nothing
  auto r = read_response(c, 5s);
  EXPECT_TRUE(c.eof() || r.status == 408) << r.status;
  EXPECT_LT(clock::now() - start, 2s);
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
  still_serving(f);
}

TEST(Hostile, BadBodiesAreNamed400s) {
  proxy_fixture f(strict());
  std::vector<std::pair<const char*, std::string>> bodies = {
      {"truncated JSON", R"({"model":"demo","messages":[)"},
      {"invalid UTF-8", "{\"model\":\"demo\",\"x\":\"\xff\xfe\"}"},
      {"raw NUL in a string", std::string("{\"model\":\"demo\",\"x\":\"a\0b\"}", 26)},
      {"lone surrogate", R"({"model":"demo","x":"\ud800"})"},
      {"max_tokens -1", R"({"model":"demo","max_tokens":-1})"},
      {"max_tokens 1e309", R"({"model":"demo","max_tokens":1e309})"},
      {"max_tokens \"100\"", R"({"model":"demo","max_tokens":"100"})"},
      {"max_tokens 2^64", R"({"model":"demo","max_tokens":18446744073709551616})"},
      {"max_tokens 1.5", R"({"model":"demo","max_tokens":1.5})"},
      {"stream \"yes\"", R"({"model":"demo","stream":"yes"})"},
      {"stream 1", R"({"model":"demo","stream":1})"},
      {"model a number", R"({"model":42})"},
      {"array body", R"([{"model":"demo"}])"},
      {"deep nesting",
       "{\"model\":\"demo\",\"x\":" + std::string(600, '[') + std::string(600, ']') + "}"},
  };
  for (auto& [name, body] : bodies) {
    auto r = send_raw(f, post_json("/v1/chat/completions", body)).response;
    EXPECT_EQ(r.status, 400) << name;
    EXPECT_NE(r.body.find("\"message\""), std::string::npos) << name;
  }
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
  still_serving(f);
}

TEST(Hostile, OtherHostsAndTraversalAreNeverFollowed) {
  proxy_fixture f(strict());
  // Host naming another host: served by the configured upstream, whose own
  // host name is what the upstream sees.
  const std::string body = R"({"model":"demo","max_tokens":1,"demo":{"ttft_ms":0}})";
  auto o = send_raw(f,
                    "POST /v1/chat/completions HTTP/1.1\r\nHost: evil.example\r\nContent-Type: "
                    "application/json\r\n"
                    "Content-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_EQ(o.response.status, 200);
  auto host = f.engine_last_request().at("headers").as_object().at("Host").as_string();
  EXPECT_EQ(host.find("evil"), boost::json::string::npos) << host;
  auto requests = f.engine_stats().requests.load();
  for (const char* target :
       {"/v1/chat/completions/../models", "/v1/%2e%2e/admin", "/v1/..%2fmetrics",
        "/v1/chat/completions%00", "//v1/chat/completions", "/v1/./chat/completions"}) {
    auto r = send_raw(f, post_json(target, R"({"model":"demo"})")).response;
    EXPECT_EQ(r.status, 404) << target;
  }
  EXPECT_EQ(f.engine_stats().requests.load(), requests);
}

TEST(Hostile, AMissingOrRepeatedHostIs400) {
  // RFC 9112 §3.2. Two Host fields mean one host to one hop and another to
  // the next.
  proxy_fixture f(strict());
  const std::string body = R"({"model":"demo","max_tokens":1,"demo":{"ttft_ms":0}})";
  const std::string framing =
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  for (const auto& [name, fields] : std::vector<std::pair<std::string, std::string>>{
           {"no Host in HTTP/1.1", "POST /v1/chat/completions HTTP/1.1\r\n"},
           {"two Hosts",
            "POST /v1/chat/completions HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n"},
           {"two Hosts, one in capitals",
            "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nHOST: a\r\n"},
           {"two Hosts in HTTP/1.0",
            "POST /v1/chat/completions HTTP/1.0\r\nHost: a\r\nHost: b\r\n"}}) {
    auto o = send_raw(f, fields + framing);
    EXPECT_EQ(o.response.status, 400) << name;
    EXPECT_NE(o.response.body.find("\"invalid_host\""), std::string::npos)
        << name << ": " << o.response.body;
  }
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
  // HTTP/1.0 had no Host to require.
  auto o = send_raw(f, "POST /v1/chat/completions HTTP/1.0\r\n" + framing);
  EXPECT_EQ(o.response.status, 200) << o.response.body;
  still_serving(f);
}

// 10,000 idle connections: tests/e2e/idle_connections.test.mjs (the real
// binary in its own process, so each side fits the descriptor limit).

}  // namespace
}  // namespace tokengate::test
