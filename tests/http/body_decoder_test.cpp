// The upstream body's framing undone in the read buffer: the payload of
// every read, whatever the cut, is exactly the body's; nothing past the
// body is taken; malformed framing is an error, never a guess.
#include "http/body_decoder.hpp"

#include <gtest/gtest.h>

#include <boost/beast/http/error.hpp>
#include <string>
#include <vector>

namespace tokengate::stream {
namespace {

// Feeds `wire` as the relay does: each piece appended to what the last
// decode left unused, decoded in place; collects the payload.
struct fed {
  std::string payload;
  std::string left;  // bytes not used when the pieces ran out
  std::vector<std::size_t> payload_per_read;
  error_code ec;
  bool done = false;
};
fed feed(body_decoder d, const std::string& wire, const std::vector<std::size_t>& cuts) {
  fed f;
  std::string buffer;
  std::size_t from = 0;
  auto pieces = cuts;
  pieces.push_back(wire.size());
  for (auto cut : pieces) {
    buffer += wire.substr(from, cut - from);
    from = cut;
    auto r = d.decode(std::span<char>(buffer.data(), buffer.size()), f.ec);
    if (f.ec) break;
    EXPECT_LE(r.begin + r.size, r.used);
    f.payload += buffer.substr(r.begin, r.size);
    f.payload_per_read.push_back(r.size);
    buffer.erase(0, r.used);
  }
  f.left = buffer;
  f.done = d.done();
  return f;
}

const std::string an_event = "data: {\"a\":1}\n\n";  // 15 bytes

TEST(BodyDecoder, OneChunkInOneReadIsDecodedWhereItLies) {
  std::string wire = "f\r\n" + an_event + "\r\n";
  auto d = body_decoder::chunked();
  error_code ec;
  auto r = d.decode(std::span<char>(wire.data(), wire.size()), ec);
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.begin, 3u) << "the payload stays after its size line: nothing moved";
  EXPECT_EQ(wire.substr(r.begin, r.size), an_event);
  EXPECT_EQ(r.used, wire.size());
  EXPECT_FALSE(d.done());
}

TEST(BodyDecoder, SeveralChunksInOneReadBecomeOneRunOfBytes) {
  std::string wire = "3\r\nabc\r\n5;ext=\"x\"\r\ndefgh\r\n1\r\ni\r\n0\r\nTrailer: t\r\n\r\nNEXT";
  auto f = feed(body_decoder::chunked(), wire, {});
  EXPECT_FALSE(f.ec);
  EXPECT_EQ(f.payload, "abcdefghi");
  EXPECT_EQ(f.payload_per_read, std::vector<std::size_t>{9}) << "one read, one run of payload";
  EXPECT_TRUE(f.done);
  EXPECT_EQ(f.left, "NEXT") << "bytes after the body are not the body's";
}

TEST(BodyDecoder, EveryCutGivesTheSamePayload) {
  std::string wire = "1a\r\nabcdefghijklmnopqrstuvwxyz\r\n2\r\n\r\n\r\n0\r\n\r\n";
  for (std::size_t a = 0; a <= wire.size(); ++a) {
    for (std::size_t b = a; b <= wire.size(); ++b) {
      auto f = feed(body_decoder::chunked(), wire, {a, b});
      ASSERT_FALSE(f.ec) << "cut at " << a << ", " << b;
      EXPECT_EQ(f.payload, "abcdefghijklmnopqrstuvwxyz\r\n") << "cut at " << a << ", " << b;
      EXPECT_TRUE(f.done);
      EXPECT_EQ(f.left, "");
    }
  }
}

TEST(BodyDecoder, ALengthEndsTheBodyAndLeavesWhatFollows) {
  auto f = feed(body_decoder::with_length(5), "hello, next", {2});
  EXPECT_EQ(f.payload, "hello");
  EXPECT_TRUE(f.done);
  EXPECT_EQ(f.left, ", next");
  EXPECT_TRUE(body_decoder::with_length(0).done());
  EXPECT_TRUE(body_decoder::none().done());
}

TEST(BodyDecoder, ABodyUntilTheCloseEndsOnlyThere) {
  auto d = body_decoder::until_close();
  std::string wire = "anything\r\n0\r\n\r\n";
  error_code ec;
  auto r = d.decode(std::span<char>(wire.data(), wire.size()), ec);
  EXPECT_EQ(wire.substr(r.begin, r.size), wire);
  EXPECT_FALSE(d.done());
  d.end_of_input(ec);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(d.done());
}

TEST(BodyDecoder, AnUnfinishedBodyAtTheCloseIsAPartialMessage) {
  for (auto d : {body_decoder::chunked(), body_decoder::with_length(10)}) {
    std::string wire = "3\r\nab";
    error_code ec;
    d.decode(std::span<char>(wire.data(), wire.size()), ec);
    d.end_of_input(ec);
    EXPECT_EQ(ec, http::error::partial_message);
  }
}

TEST(BodyDecoder, MalformedFramingIsAnError) {
  const std::vector<std::string> bad = {
      "x\r\nabc\r\n",                         // not hex
      "\r\n",                                 // no size
      "3\nabc\r\n",                           // LF without CR: the line runs on, and is no size
      "3\r\nabcX\r\n",                        // no CRLF after the payload
      "3\r\nabc\rX",                          // CR, then not LF
      "3 junk\r\nabc\r\n",                    // neither blanks nor an extension after the size
      "10000000000000000\r\n",                // more than 64 bits
      "3;a=\"open\r\nabc\r\n",                // an extension's quoted string that does not close
      "3" + std::string(5000, '0') + "\r\n",  // a size line past the bound
  };
  for (const auto& wire : bad) {
    auto f = feed(body_decoder::chunked(), wire, {});
    EXPECT_EQ(f.ec, http::error::bad_chunk) << wire.substr(0, 40);
  }
}

TEST(BodyDecoder, AnIncompleteLineIsHeldOnlyUpToTheBound) {
  std::string wire(body_decoder::max_line - 1, '0');  // a size line still arriving
  auto f = feed(body_decoder::chunked(), wire, {});
  EXPECT_FALSE(f.ec);
  EXPECT_EQ(f.left, wire) << "kept for the next read";
  wire += '0';
  f = feed(body_decoder::chunked(), wire, {});
  EXPECT_EQ(f.ec, http::error::bad_chunk) << "no line may grow the buffer without end";
}

}  // namespace
}  // namespace tokengate::stream
