#pragma once
// Finding the next byte that matters in text scanned on every request and
// every event, sixteen bytes at a time (SSE2, on every x86-64) rather than
// one: the request-body scanner and the chunk reader skip plain JSON string
// bytes, the SSE parser looks for line ends. Each returns the exact position
// (or `end`); other targets take the byte-at-a-time loop.
#include <cstdint>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace tokengate {

// The first byte at or after `p` that ends a run of plain JSON string
// content: a quote, a backslash, a control character or any non-ASCII byte
// (which the caller checks as UTF-8).
inline const char* skip_plain_string_bytes(const char* p, const char* end) {
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // A signed compare below 0x20 catches control characters and, as
    // negative numbers, every non-ASCII byte.
    __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                   _mm_cmplt_epi8(v, space));
    if (int mask = _mm_movemask_epi8(special)) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    auto c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return p;
  }
  return end;
}

// The first CR or LF at or after `p`.
inline const char* find_line_end(const char* p, const char* end) {
#ifdef __SSE2__
  const __m128i cr = _mm_set1_epi8('\r'), lf = _mm_set1_epi8('\n');
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if (int mask = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, lf))))
      return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  for (; p < end; ++p)
    if (*p == '\n' || *p == '\r') return p;
  return end;
}

}  // namespace tokengate
