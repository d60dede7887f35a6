#include "http/response_head.hpp"

#include <gtest/gtest.h>

#include <boost/beast/http/error.hpp>
#include <string>

namespace tokengate::upstream {
namespace {

struct parse_result {
  head_progress progress;
  response_head head;
  std::size_t used = 0;
  error_code ec;
};

parse_result parsed(std::string text) {
  parse_result r;
  r.progress = parse_response_head(text, r.head, r.used, r.ec);
  return r;
}

error_code refusal(std::string text) {
  auto r = parsed(std::move(text));
  EXPECT_EQ(r.progress, head_progress::failed);
  return r.ec;
}

// The shape of a hosted provider's streaming head (made-up values).
const std::string provider_head =
    "HTTP/1.1 200 OK\r\n"
    "Date: Wed, 02 Dec 2026 12:00:00 GMT\r\n"
    "Content-Type: text/event-stream; charset=utf-8\r\n"
    "Transfer-Encoding: chunked\r\n"
    "Connection: keep-alive\r\n"
    "openai-processing-ms: 187\r\n"
    "x-ratelimit-remaining-tokens: 29999985\r\n"
    "Set-Cookie: __cf_bm=abc; path=/; HttpOnly; Secure\r\n"
    "Set-Cookie: _cfuvid=def; path=/\r\n"
    "CF-RAY: 8e0123456789abcd-AMS\r\n"
    "alt-svc: h3=\":443\"; ma=86400\r\n"
    "\r\n";

TEST(ResponseHead, AProvidersHeadReadsWhole) {
  auto r = parsed(provider_head + "5\r\ndata:\r\n");
  ASSERT_EQ(r.progress, head_progress::done) << r.ec.message();
  EXPECT_EQ(r.used, provider_head.size());
  const auto& h = r.head;
  EXPECT_EQ(h.version, 11u);
  EXPECT_EQ(h.status, 200u);
  EXPECT_EQ(h.reason, "OK");
  ASSERT_EQ(h.fields.size(), 10u);
  EXPECT_EQ(h.fields[0].name, "Date");
  EXPECT_EQ(h.fields[0].value, "Wed, 02 Dec 2026 12:00:00 GMT");
  EXPECT_EQ(h.fields[0].line, "Date: Wed, 02 Dec 2026 12:00:00 GMT\r\n");
  EXPECT_EQ(h.fields[7].value, "_cfuvid=def; path=/");
  EXPECT_EQ(h.value_of("content-type"), "text/event-stream; charset=utf-8");
  EXPECT_EQ(h.value_of("SET-COOKIE"), "__cf_bm=abc; path=/; HttpOnly; Secure");  // the first of two
  EXPECT_EQ(h.value_of("x-absent"), "");
  EXPECT_TRUE(h.chunked);
  EXPECT_FALSE(h.content_length);
  EXPECT_TRUE(h.has_body());
  EXPECT_TRUE(h.keep_alive());
  EXPECT_EQ(h.bytes, provider_head);
  // The views are the copy's, not the input's.
  EXPECT_GE(h.fields[3].name.data(), h.bytes.data());
  EXPECT_LE(h.fields[3].name.data() + h.fields[3].name.size(), h.bytes.data() + h.bytes.size());
}

// A head split anywhere asks for more, never refuses, and reads the same
// once whole.
TEST(ResponseHead, EveryPrefixAsksForMore) {
  for (std::size_t n = 0; n < provider_head.size(); ++n) {
    auto r = parsed(provider_head.substr(0, n));
    ASSERT_EQ(r.progress, head_progress::need_more) << n << ": " << r.ec.message();
  }
  EXPECT_EQ(parsed(provider_head).progress, head_progress::done);
}

TEST(ResponseHead, BlanksAroundValuesAndTheirOwnBytesAreKept) {
  auto r = parsed(
      "HTTP/1.1 200 Fine Thanks\r\nX-A:plain\r\nX-B: \t spaced out \t \r\nX-Empty:\r\nX-Tab: "
      "a\tb\r\n"
      "X-Text: caf\xc3\xa9\r\n\r\n");
  ASSERT_EQ(r.progress, head_progress::done) << r.ec.message();
  EXPECT_EQ(r.head.reason, "Fine Thanks");
  ASSERT_EQ(r.head.fields.size(), 5u);
  EXPECT_EQ(r.head.fields[0].value, "plain");
  EXPECT_EQ(r.head.fields[1].value, "spaced out");
  EXPECT_EQ(r.head.fields[2].value, "");
  EXPECT_EQ(r.head.fields[3].value, "a\tb");
  EXPECT_EQ(r.head.fields[4].value, "caf\xc3\xa9");  // obs-text passes
  EXPECT_EQ(parsed("HTTP/1.1 404 \r\n\r\n").head.reason, "");
}

// RFC 9112 §5.2: a proxy may replace each fold with blanks; the value then
// runs on, and the line it forwards is one line.
TEST(ResponseHead, AFoldedValueIsBlankedIntoOneLine) {
  auto r = parsed("HTTP/1.1 200 OK\r\nX-Folded: first\r\n  second\r\n\tthird\r\nX-Next: n\r\n\r\n");
  ASSERT_EQ(r.progress, head_progress::done) << r.ec.message();
  ASSERT_EQ(r.head.fields.size(), 2u);
  EXPECT_EQ(r.head.fields[0].value, "first    second  \tthird");
  EXPECT_EQ(r.head.fields[0].line, "X-Folded: first    second  \tthird\r\n");
  EXPECT_EQ(r.head.fields[1].value, "n");
}

TEST(ResponseHead, FramingFollowsTheFields) {
  auto length = parsed("HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n").head;
  EXPECT_EQ(length.content_length, 42u);
  EXPECT_FALSE(length.chunked);
  EXPECT_TRUE(length.has_body());
  EXPECT_TRUE(length.keep_alive());
  // A repeated length, in one field or two, is the length.
  EXPECT_EQ(parsed("HTTP/1.1 200 OK\r\nContent-Length: 7 , 7\r\n\r\n").head.content_length, 7u);
  EXPECT_EQ(parsed("HTTP/1.1 200 OK\r\nContent-Length: 7\r\ncontent-length: 7\r\n\r\n")
                .head.content_length,
            7u);
  EXPECT_EQ(
      parsed("HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n").head.content_length,
      18446744073709551615u);

  auto zipped = parsed("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").head;
  EXPECT_TRUE(zipped.chunked);
  EXPECT_FALSE(zipped.body_until_close());
  // A coding without chunked: the body runs to the close, which ends the connection.
  auto to_close = parsed("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n").head;
  EXPECT_FALSE(to_close.chunked);
  EXPECT_TRUE(to_close.body_until_close());
  EXPECT_FALSE(to_close.keep_alive());
  auto bare = parsed("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n").head;
  EXPECT_TRUE(bare.body_until_close());
  EXPECT_FALSE(bare.keep_alive());

  for (const char* status : {"100 Continue", "204 No Content", "304 Not Modified"}) {
    auto none = parsed(std::string("HTTP/1.1 ") + status + "\r\nContent-Length: 10\r\n\r\n").head;
    EXPECT_FALSE(none.has_body()) << status;
    EXPECT_TRUE(none.keep_alive()) << status;
  }
  EXPECT_FALSE(parsed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").head.has_body());
}

TEST(ResponseHead, TheConnectionsFateFollowsVersionAndOptions) {
  EXPECT_FALSE(parsed("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n")
                   .head.keep_alive());
  EXPECT_FALSE(parsed("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n").head.keep_alive());
  EXPECT_TRUE(parsed("HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: Keep-Alive\r\n\r\n")
                  .head.keep_alive());
  EXPECT_FALSE(parsed("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nProxy-Connection: close\r\n\r\n")
                   .head.keep_alive());

  auto named =
      parsed("HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nConnection: ,x-other ,\r\n\r\n")
          .head;
  ASSERT_EQ(named.named_by_connection().size(), 2u);
  EXPECT_EQ(named.named_by_connection()[0], "X-Hop");
  EXPECT_EQ(named.named_by_connection()[1], "x-other");
  // (The options point into the head's own copy too.)
  EXPECT_GE(named.named_by_connection()[0].data(), named.bytes.data());
}

TEST(ResponseHead, ABrokenStatusLineIsRefused) {
  EXPECT_EQ(refusal("HTTP/2.0 200 OK\r\n\r\n"), http::error::bad_version);
  EXPECT_EQ(refusal("HTTP/1.2 200 OK\r\n\r\n"), http::error::bad_version);
  EXPECT_EQ(refusal("HTTP/1.1  200 OK\r\n\r\n"), http::error::bad_status);
  EXPECT_EQ(refusal("HTTP/1.1 2x0 OK\r\n\r\n"), http::error::bad_status);
  EXPECT_EQ(refusal("HTTP/1.1 200\r\n\r\n"), http::error::bad_status);
  EXPECT_EQ(refusal("HTTP/1.1 200 O\x01K\r\n\r\n"), http::error::bad_reason);
  // Bytes that cannot begin a response are refused as they come, not
  // waited on until the head's time runs out.
  EXPECT_EQ(refusal("\x89PNG"), http::error::bad_version);
  EXPECT_EQ(refusal("<"), http::error::bad_version);
  EXPECT_EQ(refusal("http/"), http::error::bad_version);
}

TEST(ResponseHead, ABrokenFieldIsRefused) {
  const std::string start = "HTTP/1.1 200 OK\r\n";
  EXPECT_EQ(refusal(start + "X-Name : value\r\n\r\n"), http::error::bad_field);
  EXPECT_EQ(refusal(start + ": value\r\n\r\n"), http::error::bad_field);
  EXPECT_EQ(refusal(start + "X(Name): value\r\n\r\n"), http::error::bad_field);
  EXPECT_EQ(refusal(start + " X-Lead: fold with nothing before\r\n\r\n"), http::error::bad_field);
  EXPECT_EQ(refusal(start + "X-A: a\x01"
                            "b\r\n\r\n"),
            http::error::bad_value);
  EXPECT_EQ(refusal(start + "X-A: a\x7f"
                            "b\r\n\r\n"),
            http::error::bad_value);
  EXPECT_EQ(refusal(start + "X-A: no carriage return\n\r\n"), http::error::bad_line_ending);
  EXPECT_EQ(refusal(start + "X-A: a\rb\r\n\r\n"), http::error::bad_line_ending);
  EXPECT_EQ(refusal(start + "X-A: a\r\n\rX"), http::error::bad_line_ending);
  EXPECT_EQ(refusal(start + "Connection: close, not a token\r\n\r\n"), http::error::bad_value);
  std::string many = start + "Connection: ";
  for (int i = 0; i <= 8; ++i) many += "x-" + std::to_string(i) + ",";
  EXPECT_EQ(refusal(many + "\r\n\r\n"), http::error::bad_value);
  std::string crowded = start;
  for (int i = 0; i < 513; ++i) crowded += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(refusal(crowded + "\r\n"), http::error::header_limit);
}

// The framings a request could be smuggled through are refused, in either
// order (RFC 9112 §6.1, §6.3).
TEST(ResponseHead, AmbiguousFramingIsRefused) {
  const std::string start = "HTTP/1.1 200 OK\r\n";
  EXPECT_EQ(refusal(start + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
            http::error::bad_transfer_encoding);
  EXPECT_EQ(refusal(start + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"),
            http::error::bad_content_length);
  EXPECT_EQ(refusal(start + "Transfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\n"),
            http::error::bad_content_length);
  EXPECT_EQ(refusal(start + "Transfer-Encoding: chunked, gzip\r\n\r\n"),
            http::error::bad_transfer_encoding);
  EXPECT_EQ(refusal(start + "Transfer-Encoding: chunked x\r\n\r\n"),
            http::error::bad_transfer_encoding);
  EXPECT_EQ(refusal(start + "Transfer-Encoding: chunked;x=1\r\n\r\n"),
            http::error::bad_transfer_encoding);
  EXPECT_EQ(refusal(start + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
            http::error::bad_transfer_encoding);
  EXPECT_EQ(refusal(start + "Transfer-Encoding: chunked\r\nTransfer-Encoding:\r\n\r\n"),
            http::error::bad_transfer_encoding);
  EXPECT_EQ(refusal(start + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n"),
            http::error::multiple_content_length);
  EXPECT_EQ(refusal(start + "Content-Length: 5, 6\r\n\r\n"), http::error::multiple_content_length);
  EXPECT_EQ(refusal(start + "Content-Length: 5,\r\n\r\n"), http::error::bad_content_length);
  EXPECT_EQ(refusal(start + "Content-Length: -1\r\n\r\n"), http::error::bad_content_length);
  EXPECT_EQ(refusal(start + "Content-Length: 0x10\r\n\r\n"), http::error::bad_content_length);
  EXPECT_EQ(refusal(start + "Content-Length: 18446744073709551616\r\n\r\n"),
            http::error::bad_content_length);
  EXPECT_EQ(refusal(start + "Content-Length: 123456789012345678901\r\n\r\n"),
            http::error::bad_content_length);
}

// Parsing the same bytes again (after a read that brought no end) reads
// the same head: a fold blanked in the first pass is still a fold's blanks.
TEST(ResponseHead, ASecondPassOverTheSameBytesReadsTheSame) {
  std::string text = "HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nX-B: c\r\n";
  response_head head;
  std::size_t used = 0;
  error_code ec;
  EXPECT_EQ(parse_response_head(text, head, used, ec), head_progress::need_more);
  text += "\r\n";
  ASSERT_EQ(parse_response_head(text, head, used, ec), head_progress::done);
  ASSERT_EQ(head.fields.size(), 2u);
  EXPECT_EQ(head.fields[0].value, "a   b");
  EXPECT_EQ(head.fields[1].value, "c");
  head.release_fields();
  EXPECT_TRUE(head.fields.empty());
  EXPECT_EQ(head.status, 200u);  // what the relay still reads
}

}  // namespace
}  // namespace tokengate::upstream
