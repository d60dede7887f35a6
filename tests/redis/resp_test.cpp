// The Redis protocol reader: replies that arrive in pieces, and replies
// from a store that answers garbage, which must end the connection rather
// than a worker or its memory.
#include "redis/resp.hpp"

#include <gtest/gtest.h>

namespace tokengate::redis {
namespace {

TEST(Resp, CommandsAreArraysOfBulkStrings) {
  std::string out;
  append_command(out, {"GET", "a b"});
  EXPECT_EQ(out, "*2\r\n$3\r\nGET\r\n$3\r\na b\r\n");
}

TEST(Resp, ReadsEveryKindOfReply) {
  const std::string text = "*5\r\n:0\r\n+OK\r\n$5\r\nhello\r\n$-1\r\n-ERR no\r\n";
  std::size_t consumed = 0;
  auto r = parse_reply(text, consumed);
  ASSERT_TRUE(r);
  EXPECT_EQ(consumed, text.size());
  ASSERT_EQ(r->elements.size(), 5u);
  EXPECT_EQ(r->integer_at(0), 0);
  EXPECT_EQ(r->elements[1].text, "OK");
  EXPECT_EQ(r->elements[2].text, "hello");
  EXPECT_EQ(r->elements[3].kind, reply::type::nil);
  EXPECT_TRUE(r->elements[4].is_error());
}

TEST(Resp, AReplyInPiecesIsIncompleteUntilItsLastByte) {
  const std::string text = "*2\r\n:12\r\n$3\r\nabc\r\n";
  for (std::size_t cut = 0; cut < text.size(); ++cut) {
    std::size_t consumed = 0;
    EXPECT_FALSE(parse_reply(text.substr(0, cut), consumed)) << cut;
  }
  std::size_t consumed = 0;
  EXPECT_TRUE(parse_reply(text + "+next\r\n", consumed));
  EXPECT_EQ(consumed, text.size());
}

TEST(Resp, GarbageIsAProtocolError) {
  for (std::string bad :
       std::vector<std::string>{"?what\r\n", ":12x\r\n", "$99999999999\r\n", "*-5\r\n",
                                "$3\r\nabcd\r\n", "*2000000\r\n", std::string(5000, 'x')}) {
    std::size_t consumed = 0;
    EXPECT_THROW(parse_reply(bad, consumed), protocol_error) << bad.substr(0, 20);
  }
  std::string deep;
  for (int i = 0; i < 20; ++i) deep += "*1\r\n";
  std::size_t consumed = 0;
  EXPECT_THROW(parse_reply(deep + ":1\r\n", consumed), protocol_error);
}

}  // namespace
}  // namespace tokengate::redis
