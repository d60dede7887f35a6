// The client's request as our own parser reads it (http/request_head.hpp):
// framing by chunks or by length, requests back to back on one connection,
// HTTP/1.0, and the fields that cross as the client wrote them.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <thread>

#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

const std::string demo_body =
    R"({"model":"demo","max_tokens":2,"demo":{"ttft_ms":0,"interval_ms":0}})";

// Reads until `raw` holds `text` (or the deadline passes).
bool read_until(http_client& c, std::string_view text) {
  auto deadline = clock::now() + 5s;
  while (c.raw().find(text) == std::string::npos && clock::now() < deadline)
    if (!c.read_some(1s) && c.eof()) break;
  return c.raw().find(text) != std::string::npos;
}

// A chunked body, in pieces, after a 100 Continue; then, on the same
// connection and in the same write as the last chunk, an empty line (which
// RFC 9112 §2.2 says to skip) and a request framed by its length.
TEST(Requests, AChunkedBodyAfterContinueThenAPipelinedRequest) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nX-Client-Field:  as written \r\n\r\n");
  constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
  ASSERT_TRUE(read_until(c, continue_line)) << c.raw();
  ASSERT_TRUE(c.raw().starts_with(continue_line)) << c.raw();
  c.consume(continue_line.size());

  const auto first_half = demo_body.substr(0, 20), second_half = demo_body.substr(20);
  auto hex = [](std::size_t n) {
    char digits[16];
    return std::string(digits,
                       static_cast<std::size_t>(std::snprintf(digits, sizeof digits, "%zx", n)));
  };
  c.send(hex(first_half.size()) + ";note=1\r\n" + first_half + "\r\n");
  const std::string second_body = R"({"model":"demo","max_tokens":1,"demo":{"ttft_ms":0},"n":2})";
  c.send(hex(second_half.size()) + "\r\n" + second_half + "\r\n0\r\nX-Trailer: t\r\n\r\n" + "\r\n" +
         post_json("/v1/chat/completions", second_body));

  auto first = read_response(c);
  ASSERT_TRUE(first.complete);
  EXPECT_EQ(first.status, 200) << first.body;
  c.consume(first.body_offset + first.body.size());
  auto second = read_response(c);
  ASSERT_TRUE(second.complete);
  EXPECT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(f.engine_stats().requests.load(), 2u);
  EXPECT_EQ(f.engine_last_request().at("body").as_string(), second_body);
}

// The chunked body reaches the upstream whole, framed by its length, and
// the client's fields as it wrote them; the Expect the proxy answered does
// not go on (an upstream's 100 would be read as its answer).
TEST(Requests, AChunkedBodyGoesOnWholeWithTheClientsFields) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
      "Expect: 100-continue\r\nX-Client-Field:  as written \r\nX-Folded: one\r\n two\r\n\r\n");
  ASSERT_TRUE(read_until(c, "100 Continue\r\n\r\n"));
  c.clear();
  std::string chunks;  // (seven bytes a chunk)
  for (std::size_t at = 0; at < demo_body.size(); at += 7) {
    auto piece = demo_body.substr(at, 7);
    chunks += std::to_string(piece.size()) + "\r\n" + piece + "\r\n";
  }
  c.send(chunks + "0\r\n\r\n");
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200) << r.body;
  auto seen = f.engine_last_request();
  EXPECT_EQ(seen.at("body").as_string(), demo_body);
  const auto& headers = seen.at("headers").as_object();
  EXPECT_EQ(headers.at("X-Client-Field").as_string(), "as written");
  EXPECT_EQ(headers.at("X-Folded").as_string(), "one   two") << "a fold is blanked to spaces";
  EXPECT_EQ(headers.at("Content-Length").as_string(), std::to_string(demo_body.size()));
  EXPECT_FALSE(headers.contains("Transfer-Encoding"));
  EXPECT_FALSE(headers.contains("Expect"));
}

// A long head that comes in small pieces is read whole (past its first
// 2 KiB it is parsed once its blank line has come, not at every read).
TEST(Requests, ALongHeadInSmallPiecesIsReadWhole) {
  proxy_fixture f;
  http_client c(f.port());
  const auto request =
      post_json("/v1/chat/completions", demo_body, "X-Long: " + std::string(3000, 'a') + "\r\n");
  for (std::size_t at = 0; at < request.size(); at += 200) {
    c.send(request.substr(at, 200));
    std::this_thread::sleep_for(2ms);
  }
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(f.engine_last_request().at("headers").as_object().at("X-Long").as_string().size(),
            3000u);

  // A fault past the first 2 KiB is found when the head is whole.
  http_client d(f.port());
  auto broken = post_json("/v1/chat/completions", demo_body,
                          "X-Long: " + std::string(3000, 'a') + "\r\nBad Name: x\r\n");
  for (std::size_t at = 0; at < broken.size(); at += 200) {
    d.send(broken.substr(at, 200));
    std::this_thread::sleep_for(2ms);
  }
  auto refused = read_response(d);
  EXPECT_EQ(refused.status, 400) << refused.body;
}

// HTTP/1.0: the connection ends after the answer unless the client asked
// for keep-alive; chunks did not exist then, and are refused.
TEST(Requests, Http10KeepsTheConnectionOnlyWhenAsked) {
  proxy_fixture f;
  auto request = [&](const std::string& fields) {
    return "POST /v1/chat/completions HTTP/1.0\r\nHost: localhost\r\n" + fields +
           "Content-Length: " + std::to_string(demo_body.size()) + "\r\n\r\n" + demo_body;
  };
  http_client kept(f.port());
  kept.send(request("Connection: keep-alive\r\n"));
  auto r = read_response(kept);
  EXPECT_EQ(r.status, 200);
  kept.consume(r.body_offset + r.body.size());
  kept.send(request("Connection: keep-alive\r\n"));
  EXPECT_EQ(read_response(kept).status, 200) << "the kept connection serves a second request";

  http_client closed(f.port());
  closed.send(request(""));
  EXPECT_EQ(read_response(closed).status, 200);
  EXPECT_FALSE(closed.read_some(2s));
  EXPECT_TRUE(closed.eof());

  http_client chunked(f.port());
  chunked.send(
      "POST /v1/chat/completions HTTP/1.0\r\nHost: localhost\r\nTransfer-Encoding: "
      "chunked\r\n\r\n0\r\n\r\n");
  auto refused = read_response(chunked);
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("Transfer-Encoding"), std::string::npos) << refused.body;
  EXPECT_EQ(f.engine_stats().requests.load(), 3u) << "the refused one never reached the engine";
}

}  // namespace
}  // namespace tokengate::test
