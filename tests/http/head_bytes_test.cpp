// Our one-pass head writer must produce exactly the bytes Beast's serializer
// writes for the same message: it replaced that serializer on the wire.
#include "http/head_bytes.hpp"

#include <gtest/gtest.h>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <sstream>

namespace tokengate {
namespace {

template <bool isRequest>
std::string beast_head(const http::header<isRequest>& head) {
  std::ostringstream out;
  out << head;
  return out.str();
}

TEST(HeadBytes, ARequestHeadIsWhatBeastWrites) {
  http::request<http::empty_body> req{http::verb::post, "/v1/chat/completions?x=1", 11};
  req.set(http::field::host, "api.example.com:8443");
  req.set(http::field::content_type, "application/json");
  req.set("X-Custom-Header", "a, b;  c");
  req.insert("X-Repeated", "one");
  req.insert("X-Repeated", "two");
  req.content_length(123);
  req.keep_alive(true);
  EXPECT_EQ(head_bytes(req.base()), beast_head(req.base()));
  EXPECT_TRUE(
      head_bytes(req.base())
          .starts_with("POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: api.example.com:8443\r\n"));
  EXPECT_TRUE(head_bytes(req.base()).ends_with("\r\n\r\n"));
}

TEST(HeadBytes, AnUnknownMethodAndHttp10AreKept) {
  http::request<http::empty_body> req;
  req.method_string("PURGE");
  req.target("/");
  req.version(10);
  EXPECT_EQ(head_bytes(req.base()), "PURGE / HTTP/1.0\r\n\r\n");
  EXPECT_EQ(head_bytes(req.base()), beast_head(req.base()));
}

TEST(HeadBytes, AResponseHeadIsWhatBeastWrites) {
  http::response<http::empty_body> res{http::status::ok, 11};
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Accel-Buffering", "no");
  res.chunked(true);
  res.keep_alive(false);
  EXPECT_EQ(head_bytes(res.base()), beast_head(res.base()));
  EXPECT_TRUE(head_bytes(res.base()).starts_with("HTTP/1.1 200 OK\r\n"));
}

TEST(HeadBytes, AResponseKeepsItsOwnReasonOrGetsTheStandardOne) {
  http::response<http::empty_body> res{http::status::too_many_requests, 11};
  EXPECT_EQ(head_bytes(res.base()), "HTTP/1.1 429 Too Many Requests\r\n\r\n");
  res.reason("Slow Down");
  EXPECT_EQ(head_bytes(res.base()), "HTTP/1.1 429 Slow Down\r\n\r\n");
  EXPECT_EQ(head_bytes(res.base()), beast_head(res.base()));
  http::response<http::empty_body> odd{static_cast<http::status>(599), 11};
  EXPECT_EQ(head_bytes(odd.base()), beast_head(odd.base()));
}

}  // namespace
}  // namespace tokengate
