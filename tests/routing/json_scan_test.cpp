#include "routing/json_scan.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace tokengate::routing {
namespace {

std::optional<scanned_object> scan(std::string_view text) {
  scan_error e;
  return scan_object(text, e);
}

std::string error_of(std::string_view text) {
  scan_error e;
  EXPECT_FALSE(scan_object(text, e)) << text;
  return e.message;
}

TEST(JsonScan, FindsTopLevelMembersAndTheirSpans) {
  std::string body =
      R"( {"model" : "gpt-4o", "messages":[{"role":"user","content":"a \"model\": b"}],"max_tokens":12, "stream":true} )";
  auto o = scan(body);
  ASSERT_TRUE(o);
  ASSERT_EQ(o->members.size(), 4u);
  EXPECT_EQ(string_value(body, *o->find("model")), "gpt-4o");
  EXPECT_EQ(integer_value(body, *o->find("max_tokens")), 12);
  EXPECT_EQ(o->find("messages")->type, json_type::array);
  EXPECT_EQ(o->find("stream")->type, json_type::boolean);
  EXPECT_EQ(o->find("content"), nullptr) << "nested keys are not top-level";
}

TEST(JsonScan, StringsAreQuotedAndReadBackWithTheirEscapes) {
  EXPECT_EQ(json_quote("demo"), R"("demo")");
  EXPECT_EQ(json_quote(""), R"("")");
  EXPECT_EQ(json_quote("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(json_quote(std::string("x\ny\x01z", 5)), R"("x\u000ay\u0001z")");
  EXPECT_EQ(json_quote("caf\xC3\xA9"), "\"caf\xC3\xA9\"");  // UTF-8 stays as it is
  std::string body = R"({"plain":"gpt-4o","escaped":"a\"b\\c\nd","unicode":"\u00e9"})";
  auto o = scan(body);
  ASSERT_TRUE(o);
  EXPECT_EQ(string_value(body, *o->find("plain")), "gpt-4o");
  EXPECT_EQ(string_value(body, *o->find("escaped")), "a\"b\\c\nd");
  EXPECT_EQ(string_value(body, *o->find("unicode")), std::nullopt) << "\\u escapes are not decoded";
  // What json_quote writes, string_value reads back.
  std::string quoted = std::string(R"({"k":)") + json_quote("a\"b\\c/d") + "}";
  auto q = scan(quoted);
  ASSERT_TRUE(q);
  EXPECT_EQ(string_value(quoted, *q->find("k")), "a\"b\\c/d");
}

TEST(JsonScan, RejectsMalformedInput) {
  EXPECT_EQ(error_of("[1,2]"), "the body must be a JSON object");
  EXPECT_EQ(error_of(""), "the body must be a JSON object");
  EXPECT_NE(error_of(R"({"a":1,})").find("member name"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":tru})").find("literal"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":"x)").find("unterminated"), std::string::npos);
  EXPECT_NE(error_of("{\"a\":\"\x01\"}").find("control"), std::string::npos);
  EXPECT_NE(error_of("{\"a\":\"\xff\"}").find("UTF-8"), std::string::npos);
  EXPECT_NE(error_of("{\"a\":\"\xc3\"}").find("UTF-8"), std::string::npos);
  // Strictly: no overlong forms, no encoded surrogates, nothing past U+10FFFF
  // (the first was found by tests/fuzz/policy_fuzz: Boost.JSON refuses it).
  for (const char* bad :
       {"\xE0\x96\x91", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF0\x80\x80\x80"})
    EXPECT_NE(error_of(std::string("{\"a\":\"") + bad + "\"}").find("UTF-8"), std::string::npos)
        << bad;
  scan_error none;
  EXPECT_TRUE(scan_object("{\"a\":\"\xE6\x97\xA5 \xF0\x9F\x98\x80 \xED\x9F\xBF\"}", none))
      << none.message;
  EXPECT_NE(error_of(R"({"a":01})").find("expected"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":1} x)").find("after"), std::string::npos);
  EXPECT_NE(
      error_of(std::string(1, '{') + "\"a\":" + std::string(200, '[') + std::string(200, ']') + "}")
          .find("deeply"),
      std::string::npos);
}

TEST(JsonScan, AgreesWithBoostJsonOnValidity) {
  for (std::string_view text : {R"({"a":[1,2.5e3,-0,{"b":null}],"c":"\u00e9\n"})", R"({"é":"ü"})",
                                R"({})", R"({"a":1e309})", R"({"a":"\ud83d\ude00"})"}) {
    boost::system::error_code ec;
    boost::json::parse(text, ec);
    EXPECT_EQ(static_cast<bool>(scan(text)), !ec) << text;
  }
}

TEST(JsonScan, WordAtATimeSkipAgreesWithBoostJsonAtEveryOffset) {
  // The string scan skips sixteen or eight plain bytes at a time; a special
  // byte at any offset of a block must still be seen.
  const std::vector<std::string> specials{"\x01", "\\n", "\\u00e9", "\xc3\xa9", "\xff",
                                          "\"",   "\\",  "\x7f",    " "};
  for (const auto& special : specials)
    for (std::size_t at = 0; at < 80; ++at) {
      std::string text(80, 'x');
      text.replace(at, 1, special);
      std::string body = "{\"a\":\"" + text + "\",\"b\":1}";
      boost::system::error_code ec;
      boost::json::parse(body, ec);
      EXPECT_EQ(static_cast<bool>(scan(body)), !ec) << "special " << special << " at " << at;
    }
}

// Long strings are skipped 64 bytes a step with simple escapes stepped over
// inside the step (byte_scan.hpp): an escape, a bad one or a surrogate at
// every offset of two blocks, one running into the next block or cut off
// by the end of the text, must be judged as Boost.JSON judges it, and the
// member after the string found where it is.
TEST(JsonScan, EscapesInLongStringsAgreeWithBoostJsonAtEveryOffset) {
  const std::vector<std::string> specials{"\\n",
                                          "\\\"",
                                          "\\\\",
                                          "\\/",
                                          "\\u00e9",
                                          "\\u12",
                                          "\\uD83D\\uDE00",
                                          "\\uDE00",
                                          "\\uD83D",
                                          "\\x",
                                          "\\u00G0",
                                          "\\\\\\\"",
                                          "\\n\\t\\r",
                                          "\"",
                                          "\x01",
                                          "\xC3\xA9",
                                          "\\",
                                          "\\u00e9\x01",
                                          "\\u00e9\\u4f60\\uD800",
                                          "\\u00e9\""};
  for (const auto& special : specials)
    for (std::size_t at = 0; at < 140; ++at) {
      std::string text(200, 'x');
      text.insert(at, special);
      for (const std::string& body : {"{\"a\":\"" + text + "\",\"b\":1}",
                                      "{\"a\":\"" + text.substr(0, at + special.size())}) {
        boost::system::error_code ec;
        boost::json::parse(body, ec);
        auto o = scan(body);
        ASSERT_EQ(static_cast<bool>(o), !ec) << "special " << special << " at " << at;
        if (o) {
          EXPECT_EQ(o->find("b")->begin, body.size() - 2) << "special " << special << " at " << at;
        }
      }
    }
}

// Non-ASCII text is skipped 32 bytes at a time with a check that it is
// valid UTF-8 (utf8_skip.hpp): every pair that starts with a non-ASCII byte,
// and three- and four-byte sequences built from the boundary values of
// each rule, at the offsets where a block or a 16-byte lane ends, just
// before the closing quote and cut off by the end of the text, must be
// judged as Boost.JSON judges them.
TEST(JsonScan, NonAsciiRunsAgreeWithBoostJsonAtBlockEdges) {
  auto judge = [](const std::string& body) {
    boost::system::error_code ec;
    boost::json::parse(body, ec);
    scan_error e;
    bool ours = static_cast<bool>(scan_object(body, e));
    return std::pair{ours, !ec};
  };
  // The run starts at a non-ASCII character; the candidate then lands at
  // byte 13 to 17 or 29 to 35 of it.
  const std::string lead = "\xD0\x96";  // a Cyrillic letter
  auto check = [&](const std::string& candidate) {
    for (std::size_t filler : {11u, 15u, 27u, 28u, 29u, 30u, 31u, 32u, 33u}) {
      std::string run = lead + std::string(filler, 'y');
      for (const std::string& body :
           {"{\"a\":\"" + run + candidate + "z\\n\u00e9\",\"b\":1}",
            "{\"a\":\"" + run + candidate + "\"}", "{\"a\":\"" + run + candidate}) {
        auto [ours, boost] = judge(body);
        ASSERT_EQ(ours, boost) << "candidate " << testing::PrintToString(candidate) << " after "
                               << filler;
      }
    }
  };
  for (int first = 0x80; first <= 0xFF; ++first)
    for (int second = 0x20; second <= 0xFF; ++second)
      if (second != '"' && second != '\\')
        check({static_cast<char>(first), static_cast<char>(second)});
  const unsigned char edges[] = {0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,
                                 0xC0, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xFF};
  for (int first = 0xE0; first <= 0xFF; ++first)
    for (auto second : edges)
      for (auto third : edges) {
        check({static_cast<char>(first), static_cast<char>(second), static_cast<char>(third)});
        if (first >= 0xF0)
          for (auto fourth : edges)
            check({static_cast<char>(first), static_cast<char>(second), static_cast<char>(third),
                   static_cast<char>(fourth)});
      }
}

// Runs of \u escapes (Python's json module writes every non-ASCII
// character so) are checked in a loop of their own that hands surrogates
// and bad escapes to the general code: every run of three from these must
// be judged as Boost.JSON judges it.
TEST(JsonScan, EscapeRunsAgreeWithBoostJson) {
  const std::vector<std::string> escapes{"\\u0000", "\\u00e9", "\\u4F60", "\\ud7ff", "\\uD800",
                                         "\\udbff", "\\udc00", "\\uDFFF", "\\ue000", "\\uffff",
                                         "\\u12G4", "\\u00",   "\\n",     "x"};
  for (const auto& a : escapes)
    for (const auto& b : escapes)
      for (const auto& c : escapes)
        for (const std::string& body : {"{\"a\":\"" + a + b + c + "\"}", "{\"a\":\"" + a + b + c}) {
          boost::system::error_code ec;
          boost::json::parse(body, ec);
          EXPECT_EQ(static_cast<bool>(scan(body)), !ec) << body;
        }
}

TEST(JsonScan, ABadSequenceDeepInNonAsciiTextIsReportedWhereItIs) {
  std::string text;
  for (int i = 0; i < 500; ++i) text += "\xE4\xBD\xA0";  // 1,500 bytes of Chinese
  std::string body = "{\"a\":\"" + text + "\xE4\xBD" + text + "\"}";
  scan_error e;
  EXPECT_FALSE(scan_object(body, e));
  EXPECT_EQ(e.message, "invalid UTF-8 in string");
  EXPECT_EQ(e.offset, 6 + text.size()) << "the offset of the sequence cut short";
  std::string good = "{\"a\":\"" + text + "\\n" + text + "\",\"b\":\"\xC3\xA9\"}";
  auto o = scan(good);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->members.size(), 2u);
  EXPECT_EQ(o->find("b")->begin, good.size() - 5);
}

TEST(JsonScan, IntegerValueIsExact) {
  std::string body = R"({"a":1e309,"b":"100","c":18446744073709551616,"d":-1,"e":2.0,"f":7})";
  auto o = scan(body);
  ASSERT_TRUE(o);
  EXPECT_FALSE(integer_value(body, *o->find("a")));
  EXPECT_FALSE(integer_value(body, *o->find("b")));
  EXPECT_FALSE(integer_value(body, *o->find("c")));
  EXPECT_EQ(integer_value(body, *o->find("d")), -1);
  EXPECT_FALSE(integer_value(body, *o->find("e")));
  EXPECT_EQ(integer_value(body, *o->find("f")), 7);
}

TEST(JsonScan, SplicesKeepEverythingElseByteForByte) {
  std::string body =
      R"({"model":"fast", "messages":[{"content":"  keep   this  "}],"max_completion_tokens":900,"x":1})";
  auto o = scan(body);
  ASSERT_TRUE(o);
  auto out =
      apply_splices(body, {replace_value(*o->find("model"), json_quote("gpt-4o-mini")),
                           rewrite_member(*o->find("max_completion_tokens"), "max_tokens", "64"),
                           add_member(body, *o, "stream_options", R"({"include_usage":true})")});
  EXPECT_EQ(
      out,
      R"({"model":"gpt-4o-mini", "messages":[{"content":"  keep   this  "}],"max_tokens":64,"x":1,"stream_options":{"include_usage":true}})");
  auto removed = apply_splices(body, {remove_member(body, *o, *o->find("x"))});
  EXPECT_EQ(boost::json::parse(removed).as_object().contains("x"), false);
  auto first_removed = apply_splices(body, {remove_member(body, *o, *o->find("model"))});
  EXPECT_EQ(boost::json::parse(first_removed).as_object().size(), 3u);
  std::string empty = "{}";
  auto e = scan(empty);
  EXPECT_EQ(apply_splices(empty, {add_member(empty, *e, "max_tokens", "5")}),
            R"({"max_tokens":5})");
}

TEST(JsonScan, SplicesApplyInPositionOrderAndKeepTheOrderOfInsertionsAtOnePlace) {
  std::string text = "0123456789";
  // Given last first; two insertions at 5 keep the order they were given in.
  auto out = apply_splices(text, {{8, 9, "E"}, {5, 5, "c"}, {5, 5, "d"}, {0, 1, "A"}, {2, 2, "b"}});
  EXPECT_EQ(out, "A1b234cd567E9");
}

// Found by tests/fuzz/policy_fuzz: a lone UTF-16 surrogate escape is refused,
// as Boost.JSON (and strict parsers upstream) refuse it; a pair is fine.
TEST(JsonScan, SurrogateEscapesMustPair) {
  scan_error e;
  EXPECT_TRUE(scan_object(R"({"a":"\ud83d\ude00"})", e));
  EXPECT_FALSE(scan_object(R"({"a":"\ud83d"})", e));
  EXPECT_FALSE(scan_object(R"({"a":"\ud83dx"})", e));
  EXPECT_FALSE(scan_object(R"({"a":"\ude00"})", e));
  EXPECT_FALSE(scan_object(R"({"a":"\ud83d\u0041"})", e));
}

// The start of a body still arriving: a member counts once the comma after
// it has come (a number may go on, a string may be cut), at every cut.
TEST(JsonScan, WholeMembersEndFindsTheMembersWhoseCommaHasArrived) {
  const std::string body =
      R"({"model":"m", "max_tokens" : 12 ,"stream":true,"messages":[{"content":"a,b"}]})";
  const auto after_model = body.find(',');
  const auto after_limit = body.find(',', after_model + 1);
  const auto after_stream = body.find(',', after_limit + 1);
  for (std::size_t cut = 0; cut <= body.size(); ++cut) {
    auto end = whole_members_end(std::string_view(body).substr(0, cut));
    if (cut <= after_model)
      EXPECT_EQ(end, std::string_view::npos) << cut;
    else if (cut <= after_limit)
      EXPECT_EQ(end, after_model) << cut;
    else if (cut <= after_stream)
      EXPECT_EQ(end, after_limit) << cut;
    else
      EXPECT_EQ(end, after_stream) << cut;  // the messages' own commas are not members' ends
  }
  scan_error e;
  auto start = scan_object(body.substr(0, after_stream) + "}", e);
  ASSERT_TRUE(start);
  ASSERT_EQ(start->members.size(), 3u);
  EXPECT_EQ(integer_value(body, *start->find("max_tokens")), 12);
  EXPECT_EQ(whole_members_end(R"({"a":1})"), std::string_view::npos);  // whole: nothing to guess
  EXPECT_EQ(whole_members_end(R"([1,2,)"), std::string_view::npos);
  EXPECT_EQ(whole_members_end(R"({"a":tru,"b":1,)"),
            std::string_view::npos);  // invalid: stops there
}

}  // namespace
}  // namespace tokengate::routing
