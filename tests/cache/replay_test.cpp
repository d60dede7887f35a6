// cache/replay: the proxy's own head and framing around a stored answer,
// fresh ids, the usage chunk only for a client that asked for it.
#include "cache/replay.hpp"

#include <gtest/gtest.h>

namespace {

namespace cache = tokengate::cache;
using tokengate::dialect;

cache::entry chat_stream() {
  cache::entry e;
  e.streamed = true;
  e.dialect = dialect::openai_chat;
  e.content_type = "text/event-stream";
  e.body =
      "data: {\"id\":\"chatcmpl-abc\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n"
      "data: {\"id\":\"chatcmpl-abc\",\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\n"
      "data: [DONE]\n\n";
  return e;
}

TEST(CacheReplay, AStreamIsReFramedWithFreshIdsInOneChunk) {
  auto out = cache::replayed(chat_stream(), {11, true, false, "rid", std::chrono::seconds(7)});
  EXPECT_TRUE(out.starts_with("HTTP/1.1 200 OK\r\n"));
  EXPECT_NE(out.find("x-tokengate-cache: hit\r\n"), std::string::npos);
  EXPECT_NE(out.find("Age: 7\r\n"), std::string::npos);
  EXPECT_NE(out.find("x-request-id: rid\r\n"), std::string::npos);
  EXPECT_NE(out.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_EQ(out.find("\"chatcmpl-abc\""), std::string::npos);  // (a fresh one may start "abc")
  EXPECT_NE(out.find("\"id\":\"chatcmpl-"), std::string::npos);
  EXPECT_NE(out.find("\"usage\""), std::string::npos);
  EXPECT_TRUE(out.ends_with("data: [DONE]\n\n\r\n0\r\n\r\n"));
}

TEST(CacheReplay, TheUsageChunkStaysOutForAClientThatDidNotAskForIt) {
  auto out = cache::replayed(chat_stream(), {11, true, true, "rid", std::chrono::seconds(0)});
  EXPECT_EQ(out.find("\"usage\""), std::string::npos);
  EXPECT_NE(out.find("\"content\":\"Hi\""), std::string::npos);
}

TEST(CacheReplay, AStoredBodyCannotAddAHeaderOrEndTheResponse) {
  auto e = chat_stream();
  e.body = "data: a\r\n\r\nX-Evil: 1\r\n\r\ndata: b\n\n";  // not events: re-parsed, not copied
  auto out = cache::replayed(e, {10, false, false, "rid", std::chrono::seconds(0)});
  auto head_end = out.find("\r\n\r\n");
  EXPECT_EQ(out.substr(0, head_end).find("X-Evil"), std::string::npos);
  EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(out.find("Transfer-Encoding"), std::string::npos);  // HTTP/1.0: a length instead
  EXPECT_NE(out.find("Content-Length: "), std::string::npos);
}

TEST(CacheReplay, AWholeAnswerGetsFreshIdsForItselfAndItsItems) {
  cache::entry e;
  e.dialect = dialect::openai_responses;
  e.content_type = "application/json";
  e.body = R"({"id":"resp_1","output":[{"id":"msg_2","content":[]}],"usage":{"output_tokens":3}})";
  auto out = cache::replayed(e, {11, true, false, "rid", std::chrono::seconds(0)});
  auto body = out.substr(out.find("\r\n\r\n") + 4);
  EXPECT_EQ(body.find("\"resp_1\""), std::string::npos);  // (a fresh id may start with 1)
  EXPECT_EQ(body.find("\"msg_2\""), std::string::npos);
  EXPECT_NE(body.find("\"id\":\"resp_"), std::string::npos);
  EXPECT_NE(body.find("\"output_tokens\":3"), std::string::npos);
  EXPECT_NE(out.find("Content-Length: " + std::to_string(body.size())), std::string::npos);
}

TEST(CacheReplay, PacedAStreamComesInPiecesAtItsArrivalTimesUnpacedInOne) {
  auto e = chat_stream();
  auto first_end = e.body.find("\n\n") + 2;
  e.marks = {{first_end - 5, std::chrono::milliseconds(0)},  // (an event cut across reads)
             {first_end + 3, std::chrono::milliseconds(40)},
             {e.body.size(), std::chrono::milliseconds(90)}};
  cache::replay_options o{11, true, false, "rid", std::chrono::seconds(0)};
  EXPECT_EQ(cache::replay_pieces(e, o).size(), 1u);
  o.paced = true;
  auto pieces = cache::replay_pieces(e, o);
  // the first event completes at 40 ms, the rest at 90: the first goes at
  // once, the rest 50 ms after it
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].at, std::chrono::milliseconds(0));
  EXPECT_EQ(pieces[1].at, std::chrono::milliseconds(50));
  EXPECT_TRUE(pieces[0].bytes.starts_with("HTTP/1.1 200 OK\r\n"));
  EXPECT_NE(pieces[0].bytes.find("\"content\":\"Hi\""), std::string::npos);
  EXPECT_EQ(pieces[1].bytes.find("\"content\":\"Hi\""), std::string::npos);
  EXPECT_TRUE(pieces[1].bytes.ends_with("data: [DONE]\n\n\r\n0\r\n\r\n"));
}

}  // namespace
