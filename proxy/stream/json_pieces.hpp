#pragma once
// Pieces of JSON that the lean readers (chat_chunk.hpp, responses_delta.hpp)
// vouch for without a full parse: a string's content and a plain integer.
// Each answers for exactly what Boost.JSON accepts, or "not sure"; the fuzz
// target tests/fuzz/sse_fuzz holds them to that. Inline: they run for every
// event of a stream.
#include <cstddef>
#include <string_view>

#include "scan/byte_scan.hpp"
#include "scan/utf8.hpp"

namespace tokengate::stream {

// The closing quote of the string whose content starts at `p`; nullptr
// when the content is not one this reader vouches for; `end` when the
// content runs to `end` without one. Sets `escaped` when the content holds
// an escape. Never reads past `end`.
inline const char* string_end(const char* p, const char* end, bool& escaped) {
  while (p < end) {
    p = skip_plain_string_bytes(p, end);
    if (p == end) break;
    auto c = static_cast<unsigned char>(*p);
    if (c == '"') return p;
    if (c < 0x20) return nullptr;  // raw control characters are not JSON
    if (c == '\\') {
      escaped = true;
      if (end - p < 2) return nullptr;
      char e = p[1];
      if (e == 'u') {
        auto code = hex4(std::string_view(p + 2, static_cast<std::size_t>(end - p - 2)));
        if (!code) return nullptr;
        if (*code >= 0xD800 && *code <= 0xDFFF)
          return nullptr;  // surrogates: leave pairing to the full parser
        p += 6;
      } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                 e == 'r' || e == 't') {
        p += 2;
      } else {
        return nullptr;
      }
    } else if (c < 0x80) {
      ++p;
    } else {
      auto n = utf8_sequence(reinterpret_cast<const unsigned char*>(p),
                             reinterpret_cast<const unsigned char*>(end));
      if (n == 0) return nullptr;
      p += n;
    }
  }
  return end;
}

// The length of the plain integer at `p` that these readers vouch for (the
// only kind a chunk's counters and indexes use): 1 to 18 digits, which
// cannot overflow, no sign, no leading zero, no fraction or exponent after;
// 0 for anything else ("not sure").
inline std::size_t plain_integer_length(const char* p, const char* end) {
  constexpr std::ptrdiff_t max_digits = 18;
  const char* q = p;
  while (q < end && *q >= '0' && *q <= '9' && q - p <= max_digits)
    ++q;  // (a 19th is looked at, not read)
  auto digits = q - p;
  if (digits == 0 || digits > max_digits || (digits > 1 && *p == '0')) return 0;
  if (q < end && (*q == '.' || *q == 'e' || *q == 'E')) return 0;
  return static_cast<std::size_t>(digits);
}

// JSON's four blanks.
inline bool is_json_blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace tokengate::stream
