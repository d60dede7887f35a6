#pragma once
// Text checks shared by the request-body scanner and the chunk reader:
// UTF-8 validation and the code unit of a JSON \u escape.
#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace tokengate {

// The length of the valid UTF-8 sequence that starts at `s` (a byte of 0x80
// or more), or 0 if there is none before `end`. Unicode table 3-7: no
// overlong forms, no encoded surrogates, nothing above U+10FFFF, which is
// what Boost.JSON and strict upstreams accept.
inline std::size_t utf8_sequence(const unsigned char* s, const unsigned char* end) {
  auto in = [&](std::size_t i, unsigned lo, unsigned hi) {
    return s + i < end && s[i] >= lo && s[i] <= hi;
  };
  unsigned b = s[0];
  if (b >= 0xC2 && b <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
  if (b == 0xE0) return in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF)
    return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (b == 0xED) return in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (b == 0xF0) return in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (b >= 0xF1 && b <= 0xF3)
    return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (b == 0xF4) return in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

// Each byte's value as a hex digit, 0xFF where it is none: a request
// written with \u escapes for every non-ASCII character (Python's json
// module by default) has one escape in six bytes.
inline constexpr auto hex_digit_values = [] {
  std::array<unsigned char, 256> values{};
  values.fill(0xFF);
  for (int d = 0; d < 10; ++d) values['0' + d] = static_cast<unsigned char>(d);
  for (int d = 0; d < 6; ++d)
    values['a' + d] = values['A' + d] = static_cast<unsigned char>(10 + d);
  return values;
}();

// The value of the four hex digits that follow "\u", or nothing.
inline std::optional<unsigned> hex4(std::string_view four) {
  if (four.size() < 4) return std::nullopt;
  auto digit = [&](int i) -> unsigned {
    return hex_digit_values[static_cast<unsigned char>(four[i])];
  };
  unsigned a = digit(0), b = digit(1), c = digit(2), d = digit(3);
  if ((a | b | c | d) > 0xF) return std::nullopt;
  return a << 12 | b << 8 | c << 4 | d;
}

}  // namespace tokengate
