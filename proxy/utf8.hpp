#pragma once
// Text checks shared by the request-body scanner and the chunk reader:
// UTF-8 validation and the code unit of a JSON \u escape.
#include <cstddef>
#include <optional>
#include <string_view>

namespace tokengate {

// The length of the valid UTF-8 sequence that starts at `s` (a byte of 0x80
// or more), or 0 if there is none before `end`. Unicode table 3-7: no
// overlong forms, no encoded surrogates, nothing above U+10FFFF, which is
// what Boost.JSON and strict upstreams accept.
inline std::size_t utf8_sequence(const unsigned char* s, const unsigned char* end) {
  auto in = [&](std::size_t i, unsigned lo, unsigned hi) { return s + i < end && s[i] >= lo && s[i] <= hi; };
  unsigned b = s[0];
  if (b >= 0xC2 && b <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
  if (b == 0xE0) return in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (b == 0xED) return in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (b == 0xF0) return in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (b >= 0xF1 && b <= 0xF3) return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (b == 0xF4) return in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

// The value of the four hex digits that follow "\u", or nothing.
inline std::optional<unsigned> hex4(std::string_view four) {
  if (four.size() < 4) return std::nullopt;
  unsigned value = 0;
  for (int i = 0; i < 4; ++i) {
    char c = four[i];
    unsigned digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else return std::nullopt;
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace tokengate
