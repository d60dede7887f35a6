// The AVX-512 string skip (string_skip.hpp) against a byte-at-a-time
// reading of the same rules, on random strings built from the pieces that
// matter (escapes good and bad, surrogates, backslash runs, UTF-8 good and
// bad, control characters, quotes), long enough that every piece lands on
// every side of a 64-byte block's edge.
#include "scan/string_skip.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "scan/utf8.hpp"

namespace tokengate {
namespace {

// How a byte-at-a-time reader sees a string's content: where each escape
// or character starts, and where the reading stops: at the closing quote,
// or at the start of what the skip must leave alone (anything invalid, a
// surrogate half, the text's end).
struct reading {
  std::vector<bool> starts;  // by offset, plus one past the end
  std::size_t stop = 0;
  bool at_quote = false;  // the stop is the closing quote, everything before it valid
};

reading read_by_bytes(const std::string& s) {
  reading r;
  r.starts.assign(s.size() + 1, false);
  std::size_t i = 0;
  auto hex = [&](std::size_t at) {
    return at < s.size() && hex_digit_values[static_cast<unsigned char>(s[at])] <= 0xF;
  };
  while (i < s.size()) {
    r.starts[i] = true;
    r.stop = i;
    auto c = static_cast<unsigned char>(s[i]);
    if (c == '"') {
      r.at_quote = true;
      return r;
    }
    if (c < 0x20) return r;
    if (c == '\\') {
      if (i + 1 >= s.size()) return r;
      char e = s[i + 1];
      if (std::string_view("\"\\/bfnrt").find(e) != std::string_view::npos) {
        i += 2;
        continue;
      }
      if (e != 'u' || !hex(i + 2) || !hex(i + 3) || !hex(i + 4) || !hex(i + 5)) return r;
      unsigned unit = *hex4(std::string_view(s).substr(i + 2, 4));
      if (unit >= 0xD800 && unit <= 0xDFFF) return r;  // a surrogate half: the caller pairs them
      i += 6;
      continue;
    }
    if (c < 0x80) {
      ++i;
      continue;
    }
    auto at = reinterpret_cast<const unsigned char*>(s.data());
    auto n = utf8_sequence(at + i, at + s.size());
    if (n == 0) return r;
    i += n;
  }
  r.starts[i] = true;
  r.stop = i;
  return r;
}

const std::vector<std::string>& pieces() {
  static const std::vector<std::string> all{
      // plain and valid
      "a", "abcdefgh", "The quick brown fox ", "d", "D", "8", "u", "/", "\x7f", "\\n", "\\\"",
      "\\\\", "\\/", "\\b", "\\f", "\\r", "\\t", "\\\\\\\\", "\\\\\\n", "\\u00e9", "\\u4F60",
      "\\uffff", "\\u0000", "\\ud7ff", "\\ue000", "\\uD0a1", "\xC3\xA9", "\xE4\xBD\xA0",
      "\xF0\x9F\x98\x80", "\xEF\xBF\xBF", "\xED\x9F\xBF", "\xF4\x8F\xBF\xBF",
      // surrogates, paired or not
      "\\uD83D\\uDE00", "\\ud800", "\\uDFFF", "\\udbff\\udc00",
      // invalid escapes
      "\\x", "\\u12", "\\u12G4", "\\U0041", "\\", "\\\xC3\xA9", "\\u\"123", "\\u00\\n",
      // control characters and quotes
      "\x01", "\x1f", "\t", "\"",
      // invalid UTF-8
      "\x80", "\xBF", "\xC0\x80", "\xC1\xBF", "\xC2", "\xE0\x80\x80", "\xE0\x9F\xBF",
      "\xED\xA0\x80", "\xE4\xBD", "\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80",
      "\xFF",
      "\xE4"
      "a",
      "\xF0\x9F\x98"};
  return all;
}

// Mostly valid pieces, so that strings reach far before their first fault.
std::string random_content(std::mt19937& random) {
  const auto& all = pieces();
  std::size_t valid = 32;  // the first ones in `pieces` are valid
  std::uniform_int_distribution<std::size_t> count(0, 120);
  std::uniform_int_distribution<int> percent(0, 99);
  std::string s;
  for (std::size_t n = count(random); n > 0; --n) {
    bool any = percent(random) < 1;
    s += all[std::uniform_int_distribution<std::size_t>(0, (any ? all.size() : valid) - 1)(random)];
  }
  if (percent(random) < 70) s += '"';
  return s;
}

// The skip on `text` against the byte-at-a-time reading: never past where
// the reading stops, only where an escape or character starts, exactly at
// a valid string's closing quote, and close to a fault (back three bytes
// for UTF-8, then to the start of an escape those may land in; not back to
// where the skip started). Sets `reached_quote` when the string is valid
// to its quote.
void expect_skip_agrees(const std::string& text, bool& reached_quote) {
  reading expected = read_by_bytes(text);
  auto at = static_cast<std::size_t>(
      skip_json_string_content(text.data(), text.data() + text.size()) - text.data());
  ASSERT_LE(at, expected.stop) << testing::PrintToString(text);
  ASSERT_TRUE(expected.starts[at]) << "stopped inside an escape or a character at " << at << " of "
                                   << testing::PrintToString(text);
  if (expected.at_quote) {
    ASSERT_EQ(at, expected.stop) << "a valid string's end not reached in "
                                 << testing::PrintToString(text);
  }
  ASSERT_GE(at + 8, expected.stop) << testing::PrintToString(text);
  reached_quote = expected.at_quote;
}

TEST(StringSkip, StopsAtTheQuoteOrBeforeWhatItCannotVouchFor) {
  if (!json_string_skip_available()) GTEST_SKIP() << "this processor lacks AVX-512 BW and VBMI";
  ASSERT_EQ(pieces()[31], "\xF4\x8F\xBF\xBF") << "the valid pieces come first";
  std::mt19937 random(20261204);
  std::size_t reached_quote = 0;
  for (int round = 0; round < 200000; ++round) {
    std::string s = random_content(random);
    // Where the skip starts is where a reader may stand: a piece's start.
    reading whole = read_by_bytes(s);
    std::size_t from = 0;
    if (round % 3 == 0 && whole.stop > 0) {
      from = std::uniform_int_distribution<std::size_t>(0, whole.stop)(random);
      while (!whole.starts[from]) --from;
    }
    bool valid = false;
    expect_skip_agrees(s.substr(from), valid);
    if (HasFatalFailure()) return;
    reached_quote += valid;
  }
  EXPECT_GT(reached_quote, 40000u) << "too few strings were valid to their end to test that";
}

// Long text of one kind, with one piece at every offset across two
// blocks' edges: the skip must reach the end quote past every valid piece
// and stop at or before every other, with the closing quote and without
// it (the text's end is then where it stops, or before).
TEST(StringSkip, EveryPieceAtEveryOffsetAcrossBlockEdges) {
  if (!json_string_skip_available()) GTEST_SKIP() << "this processor lacks AVX-512 BW and VBMI";
  for (const std::string& filler :
       {std::string("x"), std::string("\xE4\xBD\xA0"), std::string("\\n"), std::string("\\u00e9")})
    for (const auto& piece : pieces())
      for (std::size_t at = 0; at < 140; ++at) {
        std::string text;
        while (text.size() < at) text += filler;
        text += piece;
        while (text.size() < 200) text += filler;
        bool valid = false;
        expect_skip_agrees(text + '"', valid);
        expect_skip_agrees(text, valid);
        if (HasFatalFailure()) return;
      }
}

}  // namespace
}  // namespace tokengate
