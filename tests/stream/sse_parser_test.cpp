// The SSE parser against every fixture in tests/fixtures/sse: whole, byte by
// byte, and split in two at every position (CRLF split between CR and LF
// included). The events must be the same each time and match .expect.json.
#include "stream/sse_parser.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/read_file.hpp"

namespace tokengate::stream {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

struct recorded {
  std::string type;
  std::string data;
  bool operator==(const recorded&) const = default;
};

class recorder final : public sse_sink {
 public:
  void on_event(const sse_event& e) override {
    events.push_back({std::string(e.type), std::string(e.data)});
  }
  std::vector<recorded> events;
};

using test::read_file;

struct parsed {
  std::vector<recorded> events;
  bool incomplete_tail;
};

parsed parse_in_pieces(std::string_view body, const std::vector<std::size_t>& cuts) {
  sse_parser parser;
  recorder r;
  std::size_t from = 0;
  for (auto cut : cuts) {
    parser.feed(body.substr(from, cut - from), r);
    from = cut;
  }
  parser.feed(body.substr(from), r);
  return {r.events, parser.has_incomplete_event()};
}

std::vector<fs::path> sse_fixtures() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(TOKENGATE_FIXTURES) / "sse"))
    if (e.path().extension() == ".sse") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SseParser, FixturesExist) { EXPECT_GE(sse_fixtures().size(), 20u); }

TEST(SseParser, EveryFixtureMatchesItsExpectationAtEverySplit) {
  for (const auto& path : sse_fixtures()) {
    SCOPED_TRACE(path.filename().string());
    auto body = read_file(path);
    auto expect_path = path;
    expect_path.replace_extension(".expect.json");
    auto expect = json::parse(read_file(expect_path)).as_object();

    auto whole = parse_in_pieces(body, {});
    EXPECT_EQ(whole.events.size(), expect.at("events_total").to_number<std::size_t>());
    EXPECT_EQ(whole.incomplete_tail, expect.at("trailing_incomplete_event_discarded").as_bool());

    // Every dispatched event is JSON, [DONE], or (kind "ignored") empty.
    const auto& kinds = expect.at("event_kinds").as_array();
    ASSERT_EQ(kinds.size(), whole.events.size());
    for (std::size_t i = 0; i < whole.events.size(); ++i) {
      const auto& data = whole.events[i].data;
      if (kinds[i].as_string() == "ignored") {
        EXPECT_TRUE(data.empty()) << "event " << i;
      } else if (data != "[DONE]") {
        boost::system::error_code ec;
        json::parse(data, ec);
        EXPECT_FALSE(ec) << "event " << i << " is not JSON: " << data;
      }
    }

    std::vector<std::size_t> every_byte;
    for (std::size_t i = 1; i < body.size(); ++i) every_byte.push_back(i);
    auto bytewise = parse_in_pieces(body, every_byte);
    EXPECT_EQ(bytewise.events, whole.events) << "byte-by-byte feed differs";
    EXPECT_EQ(bytewise.incomplete_tail, whole.incomplete_tail);

    for (std::size_t cut = 1; cut < body.size(); ++cut) {
      auto split = parse_in_pieces(body, {cut});
      ASSERT_EQ(split.events, whole.events) << "split at byte " << cut;
    }
  }
}

// Events whole in one chunk take a shortcut (a data line, perhaps after an
// event: line; no copy); fed a byte at a time, every event goes line by
// line. Both must report the same offsets to the sink, which the relay cuts
// and drops by.
class offset_recorder final : public sse_sink {
 public:
  explicit offset_recorder(const sse_parser& parser) : parser_(parser) {}
  void on_event(const sse_event& e) override {
    seen.push_back(std::string(e.type) + '|' + std::string(e.data) + '|' +
                   std::to_string(parser_.boundary()) + '-' + std::to_string(parser_.position()));
  }
  std::vector<std::string> seen;

 private:
  const sse_parser& parser_;
};

// Fed whole, or a byte at a time but for CRLF pairs (a CR that ends a feed
// cannot know that an LF follows, so the event's end position differs;
// BoundaryCoversACrlfSplitAcrossChunks covers that case).
std::vector<std::string> offsets_seen(std::string_view body, bool whole) {
  sse_parser parser;
  offset_recorder r(parser);
  std::size_t from = 0;
  for (std::size_t at = 1; !whole && at < body.size(); ++at) {
    if (body[at - 1] == '\r' && body[at] == '\n') continue;
    parser.feed(body.substr(from, at - from), r);
    from = at;
  }
  parser.feed(body.substr(from), r);
  r.seen.push_back("end " + std::to_string(parser.boundary()) +
                   (parser.at_event_boundary() ? " between" : " inside"));
  return r.seen;
}

TEST(SseParser, WholeEventsAndBytewiseFeedsReportTheSameOffsets) {
  for (const auto& path : sse_fixtures()) {
    SCOPED_TRACE(path.filename().string());
    auto body = read_file(path);
    EXPECT_EQ(offsets_seen(body, true), offsets_seen(body, false));
  }
  // Line ends the shortcut takes (LF LF, CRLF CRLF) and those it leaves to
  // the line-by-line path (mixed, CR alone, two data lines).
  std::string mixed =
      ": hi\n\ndata: a\n\ndata:b\r\n\r\ndata: c\n\r\ndata: d\r\rdata: e\r\n\n"
      "event: x\ndata: f\n\ndata: g\ndata: h\n\ndata:\n\ndata:  i\n\ndata: j\n";
  auto whole = offsets_seen(mixed, true);
  EXPECT_EQ(whole, offsets_seen(mixed, false));
  EXPECT_EQ(whole, (std::vector<std::string>{"message|a|6-15", "message|b|15-25", "message|c|25-35",
                                             "message|d|35-44", "message|e|44-54", "x|f|54-72",
                                             "message|g\nh|72-89", "message||89-96",
                                             "message| i|96-106", "end 106 inside"}));
  // An `event:` line before the data line (Anthropic's events) is taken
  // whole too; an empty type leaves the event to start after it.
  std::string typed =
      "event: delta\ndata: k\n\nevent: d2\r\ndata: l\r\n\r\nevent:\r\ndata: m\r\n\r\nevent: "
      "x\ndata: n\r\n\r\n";
  auto typed_whole = offsets_seen(typed, true);
  EXPECT_EQ(typed_whole, offsets_seen(typed, false));
  EXPECT_EQ(typed_whole, (std::vector<std::string>{"delta|k|0-22", "d2|l|22-44", "message|m|52-63",
                                                   "x|n|63-83", "end 83 between"}));
}

TEST(SseParser, FollowsTheWhatwgFieldRules) {
  std::string body =
      "\xEF\xBB\xBF: comment\r\n"
      "event: delta\r"
      "data:first\n"
      "data:  second\n"
      ": a comment inside the event\n"
      "id: 7\n"
      "unknown: ignored\n"
      "\n"
      "retry: 100\n\n"
      "data\n\n"
      "data: tail without blank line";
  auto result = parse_in_pieces(body, {});
  ASSERT_EQ(result.events.size(), 2u);
  EXPECT_EQ(result.events[0].type, "delta");
  EXPECT_EQ(result.events[0].data, "first\n second");
  EXPECT_EQ(result.events[1].type, "message");
  EXPECT_EQ(result.events[1].data, "");
  EXPECT_TRUE(result.incomplete_tail);
}

TEST(SseParser, TracksEventBoundariesForInjectedEvents) {
  sse_parser parser;
  recorder r;
  parser.feed("data: {\"a\":1}\n\n", r);
  EXPECT_TRUE(parser.at_event_boundary());
  parser.feed("data: {\"b\"", r);
  EXPECT_TRUE(parser.inside_line());
  EXPECT_FALSE(parser.at_event_boundary());
  parser.feed(":2}\n", r);
  EXPECT_FALSE(parser.inside_line());
  EXPECT_FALSE(parser.at_event_boundary());
  parser.feed("\n", r);
  EXPECT_TRUE(parser.at_event_boundary());
  EXPECT_EQ(r.events.size(), 2u);
}

TEST(SseParser, DropsAnOversizedEventButKeepsParsing) {
  sse_parser parser(64);
  recorder r;
  parser.feed("data: " + std::string(200, 'x') + "\n\n", r);
  parser.feed("data: small\n\n", r);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].data, "small");
  EXPECT_EQ(parser.oversized_events(), 1u);
}

}  // namespace
}  // namespace tokengate::stream

// Found by tests/fuzz/sse_fuzz: a CRLF split between two chunks must move the
// boundary past the LF, as the same bytes in one chunk do.
TEST(SseParser, BoundaryCoversACrlfSplitAcrossChunks) {
  struct none : tokengate::stream::sse_sink {
    void on_event(const tokengate::stream::sse_event&) override {}
  } sink;
  tokengate::stream::sse_parser whole, split;
  std::string_view bytes = "data: a\r\n\r\nid";
  whole.feed(bytes, sink);
  split.feed(bytes.substr(0, 10), sink);  // ends in the CR of the empty line
  split.feed(bytes.substr(10), sink);
  EXPECT_EQ(whole.boundary(), 11u);
  EXPECT_EQ(split.boundary(), whole.boundary());
}
