#include "http/request_head.hpp"

#include <gtest/gtest.h>

#include <boost/beast/http/error.hpp>
#include <string>

#include "http/chunked_body.hpp"

namespace tokengate {
namespace {

struct parse_result {
  head_progress progress;
  request_head head;
  std::size_t used = 0;
  error_code ec;
};

parse_result parsed(std::string text, std::size_t max_fields = max_head_fields) {
  parse_result r;
  r.progress = parse_request_head(text, r.head, r.used, r.ec, max_fields);
  return r;
}

error_code refusal(std::string text) {
  auto r = parsed(std::move(text));
  EXPECT_EQ(r.progress, head_progress::failed) << text;
  return r.ec;
}

// The OpenAI Python SDK's head (its version numbers made up).
const std::string sdk_head =
    "POST /v1/chat/completions?x=1 HTTP/1.1\r\n"
    "Host: api.openai.com\r\n"
    "Accept-Encoding: gzip, deflate\r\n"
    "Connection: keep-alive\r\n"
    "Accept: application/json\r\n"
    "Content-Type: application/json\r\n"
    "User-Agent: OpenAI/Python 1.0.0\r\n"
    "X-Stainless-Lang: python\r\n"
    "Authorization: Bearer sk-client\r\n"
    "Content-Length: 2\r\n"
    "\r\n";

TEST(RequestHead, TheSdksHeadReadsWhole) {
  auto r = parsed(sdk_head + "{}POST /next");
  ASSERT_EQ(r.progress, head_progress::done) << r.ec.message();
  EXPECT_EQ(r.used, sdk_head.size());
  const auto& h = r.head;
  EXPECT_EQ(h.method, http::verb::post);
  EXPECT_EQ(h.method_string, "POST");
  EXPECT_EQ(h.target, "/v1/chat/completions?x=1");
  EXPECT_EQ(h.version, 11u);
  ASSERT_EQ(h.fields.size(), 9u);
  EXPECT_EQ(h.fields[7].line, "Authorization: Bearer sk-client\r\n");
  EXPECT_EQ(h.value_of("authorization"), "Bearer sk-client");
  EXPECT_EQ(h.content_length, 2u);
  EXPECT_TRUE(h.has_body());
  EXPECT_TRUE(h.keep_alive());
  EXPECT_FALSE(h.expects_continue());
  EXPECT_EQ(h.bytes, sdk_head);
  // The views are the copy's, not the input's.
  EXPECT_GE(h.target.data(), h.bytes.data());
  EXPECT_LE(h.target.data() + h.target.size(), h.bytes.data() + h.bytes.size());
}

// The fields read by name are noted as the head is parsed: the first of
// each name, whatever its case, as a walk over the fields finds it.
TEST(RequestHead, KnownFieldsAreTheFirstOfTheirName) {
  auto r = parsed(
      "POST /v1/messages HTTP/1.1\r\nhost: a\r\nX-API-KEY: first\r\nContent-Type: "
      "application/json\r\n"
      "x-api-key: second\r\nX-Request-Id: abc\r\nEXPECT: 100-continue\r\nContent-Length: "
      "2\r\n\r\n");
  ASSERT_EQ(r.progress, head_progress::done) << r.ec.message();
  const auto& h = r.head;
  EXPECT_EQ(h.value_of(known_field::x_api_key), "first");
  EXPECT_EQ(h.value_of(known_field::x_request_id), "abc");
  EXPECT_EQ(h.value_of(known_field::content_type), "application/json");
  EXPECT_EQ(h.value_of(known_field::authorization), "");
  EXPECT_TRUE(h.expects_continue());
  EXPECT_TRUE(h.host_fields_allowed());
  for (auto known : {known_field::authorization, known_field::x_api_key, known_field::x_request_id,
                     known_field::expect, known_field::content_type}) {
    const char* names[] = {"authorization", "x-api-key", "x-request-id", "expect", "content-type"};
    EXPECT_EQ(h.value_of(known), h.value_of(names[static_cast<int>(known)]))
        << names[static_cast<int>(known)];
  }
  // Parsed again into the same head, nothing of the last one stays.
  auto again = parse_result{};
  std::string text = sdk_head;
  again.progress = parse_request_head(text, r.head, again.used, again.ec);
  ASSERT_EQ(again.progress, head_progress::done);
  EXPECT_EQ(r.head.value_of(known_field::x_api_key), "");
  EXPECT_EQ(r.head.value_of(known_field::authorization), "Bearer sk-client");
  EXPECT_EQ(r.head.host_fields, 1u);
  EXPECT_FALSE(parsed("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n").head.host_fields_allowed());
  EXPECT_FALSE(parsed("GET / HTTP/1.1\r\n\r\n").head.host_fields_allowed());
  EXPECT_TRUE(parsed("GET / HTTP/1.0\r\n\r\n").head.host_fields_allowed());
}

// A head split anywhere asks for more, never refuses.
TEST(RequestHead, EveryPrefixAsksForMore) {
  const auto text = "\r\n" + sdk_head;  // (with an empty line first, which is skipped)
  for (std::size_t n = 0; n < text.size(); ++n) {
    auto r = parsed(text.substr(0, n));
    ASSERT_EQ(r.progress, head_progress::need_more) << n << ": " << r.ec.message();
  }
  auto whole = parsed(text);
  ASSERT_EQ(whole.progress, head_progress::done);
  EXPECT_EQ(whole.used, text.size());
  EXPECT_EQ(whole.head.method_string, "POST");
}

TEST(RequestHead, ConnectionAndVersionDecideKeepAlive) {
  auto keep = [](std::string version, std::string fields) {
    auto r = parsed("GET / HTTP/" + version + "\r\n" + fields + "\r\n");
    EXPECT_EQ(r.progress, head_progress::done) << r.ec.message();
    return r.head.keep_alive();
  };
  EXPECT_TRUE(keep("1.1", ""));
  EXPECT_FALSE(keep("1.1", "Connection: Close\r\n"));
  EXPECT_FALSE(keep("1.1", "Connection: x-hop\r\nConnection: close\r\n"));
  EXPECT_FALSE(keep("1.0", ""));
  EXPECT_TRUE(keep("1.0", "Connection: Keep-Alive\r\n"));
  auto r = parsed("GET / HTTP/1.1\r\nConnection: x-one, X-Two\r\n\r\n");
  ASSERT_EQ(r.head.named_by_connection().size(), 2u);
  EXPECT_EQ(r.head.named_by_connection()[1], "X-Two");
}

TEST(RequestHead, BodiesAreFramedByLengthOrByChunkedAlone) {
  auto chunked =
      parsed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-Continue\r\n\r\n");
  ASSERT_EQ(chunked.progress, head_progress::done);
  EXPECT_TRUE(chunked.head.chunked);
  EXPECT_TRUE(chunked.head.has_body());
  EXPECT_TRUE(chunked.head.expects_continue());
  auto none = parsed("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(none.progress, head_progress::done);
  EXPECT_FALSE(none.head.has_body());
  EXPECT_FALSE(parsed("GET / HTTP/1.1\r\n\r\n").head.has_body());

  using http::error;
  EXPECT_EQ(refusal("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            error::bad_transfer_encoding);
  EXPECT_EQ(refusal("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            error::bad_transfer_encoding);
  EXPECT_EQ(refusal("POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n"), error::bad_transfer_encoding);
  EXPECT_EQ(refusal("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            error::bad_transfer_encoding);
  EXPECT_EQ(refusal("POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"),
            error::bad_transfer_encoding);
  EXPECT_EQ(refusal("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n"),
            error::bad_content_length);
  EXPECT_EQ(refusal("POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n"),
            error::multiple_content_length);
}

// What cannot begin a request is refused at its first byte (a TLS
// handshake on a plain listener), not after the head timeout.
TEST(RequestHead, ABrokenRequestLineIsRefusedAsItComes) {
  using http::error;
  EXPECT_EQ(refusal("\x16\x03\x01"), error::bad_method);
  EXPECT_EQ(refusal(" GET"), error::bad_method);
  EXPECT_EQ(refusal("GET  /"), error::bad_target);
  EXPECT_EQ(refusal("GET /a\x01"), error::bad_target);
  EXPECT_EQ(refusal("GET / HTTQ"), error::bad_version);
  EXPECT_EQ(refusal("GET / HTTP/2.0\r\n"), error::bad_version);
  EXPECT_EQ(refusal("GET / HTTP/1.1\n"), error::bad_line_ending);
  EXPECT_EQ(refusal("GET / HTTP/1.1\r\r"), error::bad_line_ending);
  // A field's fault is found once the head has come whole (the fields are
  // parsed once), as Beast found it.
  EXPECT_EQ(parsed("GET / HTTP/1.1\r\nHost a\r\n").progress, head_progress::need_more);
  EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost a\r\n\r\n"), error::bad_field);
  EXPECT_EQ(refusal(std::string("GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n", 29)), error::bad_value);
  auto odd = parsed("BREW /pot HTTP/1.1\r\n\r\n");
  ASSERT_EQ(odd.progress, head_progress::done);
  EXPECT_EQ(odd.head.method, http::verb::unknown);
  EXPECT_EQ(odd.head.method_string, "BREW");
}

TEST(RequestHead, MoreFieldsThanAllowedAreRefused) {
  std::string text = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 5; ++i) text += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(parsed(text + "\r\n", 5).progress, head_progress::done);
  auto r = parsed(text + "X-5: v\r\n\r\n", 5);
  EXPECT_EQ(r.progress, head_progress::failed);
  EXPECT_EQ(r.ec, http::error::header_limit);
  EXPECT_EQ(r.head.fields.size(), 5u);
}

// The chunked body's step: chunks in any cut, the payload only, what
// follows the body left, and the limit on the payload.
TEST(RequestHead, ChunkedBodiesAreTakenUpToTheirLimit) {
  const std::string chunks = "3;ext=1\r\n{\"a\r\n5\r\n\":1}x\r\n0\r\nX-Trailer: t\r\n\r\nGET /next";
  for (std::size_t cut = 0; cut <= chunks.size(); ++cut) {
    std::string first = chunks.substr(0, cut);
    auto decoder = body_decoder::chunked();
    body_bytes body;
    error_code ec;
    auto used = take_chunks(decoder, first, body, 100, ec);
    ASSERT_FALSE(ec) << cut;
    std::string more = first.substr(used) + chunks.substr(cut);
    used = take_chunks(decoder, more, body, 100, ec);
    ASSERT_FALSE(ec) << cut;
    ASSERT_TRUE(decoder.done()) << cut;
    EXPECT_EQ(std::string(body.begin(), body.end()), "{\"a\":1}x") << cut;
    EXPECT_EQ(more.substr(used), "GET /next") << cut;
  }
  auto decoder = body_decoder::chunked();
  body_bytes body;
  error_code ec;
  std::string over = "5\r\n12345\r\n5\r\n67890\r\n0\r\n\r\n";
  take_chunks(decoder, over, body, 8, ec);
  EXPECT_EQ(ec, http::error::body_limit);
  EXPECT_LE(body.size(), 8u);
}

}  // namespace
}  // namespace tokengate
