// The vector scans against the byte-at-a-time rule they stand for, with the
// byte that matters at every position of strings long enough to take each
// path (AVX2 from 128 bytes where the processor has it, SSE2, the tail loop).
#include "scan/byte_scan.hpp"

#include <gtest/gtest.h>

#include <string>

namespace tokengate {
namespace {

const char* plain_end_by_bytes(const char* p, const char* end) {
  for (; p < end; ++p) {
    auto c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return p;
  }
  return end;
}

TEST(ByteScan, SkipPlainStringBytesStopsWhereTheByteLoopDoes) {
  const char specials[] = {'"', '\\', '\x00', '\x1f', '\x7f' /* plain */, '\x80', '\xff'};
  for (std::size_t length : {0u, 1u, 15u, 16u, 17u, 63u, 64u, 127u, 128u, 129u, 200u, 300u}) {
    std::string text(length, 'a');
    EXPECT_EQ(skip_plain_string_bytes(text.data(), text.data() + length), text.data() + length)
        << length;
    for (std::size_t at = 0; at < length; ++at)
      for (char c : specials) {
        std::string t = text;
        t[at] = c;
        // A second special later must not be found first.
        if (at + 40 < length) t[at + 40] = '"';
        for (std::size_t from : {std::size_t{0}, at / 2}) {
          const char* begin = t.data() + from;
          const char* end = t.data() + length;
          ASSERT_EQ(skip_plain_string_bytes(begin, end), plain_end_by_bytes(begin, end))
              << "length " << length << ", byte " << int(static_cast<unsigned char>(c)) << " at "
              << at << ", from " << from;
        }
      }
  }
}

TEST(ByteScan, FindLineEndStopsAtTheFirstCrOrLf) {
  for (std::size_t length : {0u, 5u, 16u, 31u, 100u}) {
    std::string text(length, 'x');
    EXPECT_EQ(find_line_end(text.data(), text.data() + length), text.data() + length);
    for (std::size_t at = 0; at < length; ++at)
      for (char c : {'\r', '\n'}) {
        std::string t = text;
        t[at] = c;
        if (at + 3 < length) t[at + 3] = '\n';
        EXPECT_EQ(find_line_end(t.data(), t.data() + length), t.data() + at) << length << " " << at;
      }
  }
}

}  // namespace
}  // namespace tokengate
