#pragma once
// Finding the next byte that matters in text scanned on every request and
// every event, sixteen bytes at a time (SSE2, on every x86-64; long strings
// sixty-four at a time where the processor has AVX2) rather than one: the
// request-body scanner and the chunk reader skip plain JSON string bytes,
// the SSE parser looks for line ends. Each returns the exact position (or
// `end`); other targets take the byte-at-a-time loop.
#include <cstddef>
#include <cstdint>

#include "scan/utf8.hpp"
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TOKENGATE_AVX2_SCAN 1
#endif

namespace tokengate {

// The length of the escape at `p` (a backslash) that needs no more thought:
// 2 for \" \\ \/ \b \f \n \r \t, 6 for \u and four hex digits outside the
// surrogates; 0 for anything else (a bad escape, a surrogate half, the text
// ending), which the caller's general code takes.
inline std::size_t simple_escape_length(const char* p, const char* end) {
  if (end - p < 2) return 0;
  switch (p[1]) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
      return 2;
    case 'u': {
      if (end - p < 6) return 0;
      auto digit = [&](int i) -> unsigned {
        return hex_digit_values[static_cast<unsigned char>(p[i])];
      };
      unsigned a = digit(2), b = digit(3), c = digit(4), d = digit(5);
      if ((a | b | c | d) > 0xF || (a == 0xD && b >= 8)) return 0;  // not hex, or U+D800..DFFF
      return 6;
    }
    default:
      return 0;
  }
}

// The end of a run of \u escapes outside the surrogates from `p` (p itself
// when there is none), in a loop of their own: Python's json module writes
// every non-ASCII character so by default, six bytes each (a 200 KB
// Chinese prompt holds 33,000).
inline const char* skip_unicode_escape_run(const char* p, const char* end) {
  while (end - p >= 6 && p[0] == '\\' && p[1] == 'u' && simple_escape_length(p, end) == 6) p += 6;
  return p;
}

#ifdef TOKENGATE_AVX2_SCAN
namespace byte_scan_detail {

// Whether this processor has AVX2 (asked once). The build targets plain
// x86-64, so the wider scan is a separate function chosen at run time.
inline bool have_avx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}

// Scans 64 bytes a step for the first byte that `mark` flags (it maps 32
// bytes to 0xFF where a byte matters): returns it, or where fewer than 64
// bytes are left (the caller's loop takes the rest).
template <typename Mark>
__attribute__((target("avx2"))) inline const char* scan_avx2(const char* p, const char* end,
                                                             Mark mark) {
  while (end - p >= 64) {
    __m256i low = mark(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    __m256i high = mark(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
    __m256i either = _mm256_or_si256(low, high);
    if (!_mm256_testz_si256(either, either)) {
      if (auto mask = static_cast<unsigned>(_mm256_movemask_epi8(low)))
        return p + __builtin_ctz(mask);
      return p + 32 + __builtin_ctz(static_cast<unsigned>(_mm256_movemask_epi8(high)));
    }
    p += 64;
  }
  return p;
}

// What ends plain JSON string content: a quote, a backslash, and (signed:
// below 0x20) control characters and every non-ASCII byte.
struct plain_string_stops {
  __attribute__((target("avx2"))) __m256i operator()(__m256i v) const {
    return _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('"')),
                                           _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\\'))),
                           _mm256_cmpgt_epi8(_mm256_set1_epi8(0x20), v));
  }
};

struct line_ends {
  __attribute__((target("avx2"))) __m256i operator()(__m256i v) const {
    return _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\r')),
                           _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\n')));
  }
};

// The long-string part of skip_plain_string_bytes: a 200 KB prompt is one
// string, and this is where the request scan spends its time.
__attribute__((target("avx2"))) inline const char* skip_plain_avx2(const char* p, const char* end) {
  return scan_avx2(p, end, plain_string_stops{});
}

// skip_plain_avx2 that also steps over simple escapes, without leaving its
// 64-byte block where they end inside it: a prompt of source code holds a
// \n or \" every few dozen bytes, and stopping at each cost 1 ms per MB.
__attribute__((target("avx2"))) inline const char* skip_plain_and_escapes_avx2(const char* p,
                                                                               const char* end) {
  plain_string_stops mark;
  while (end - p >= 64) {
    __m256i low = mark(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    __m256i high = mark(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
    __m256i either = _mm256_or_si256(low, high);
    if (_mm256_testz_si256(either, either)) {  // plain text throughout, the usual case
      p += 64;
      continue;
    }
    std::uint64_t stops =
        static_cast<std::uint64_t>(static_cast<unsigned>(_mm256_movemask_epi8(high))) << 32 |
        static_cast<unsigned>(_mm256_movemask_epi8(low));
    const char* next = p + 64;
    while (stops) {
      auto k = static_cast<unsigned>(__builtin_ctzll(stops));
      const char* at = p + k;
      if (*at != '\\') return at;
      auto n = simple_escape_length(at, end);
      if (n == 0) return at;
      const char* after = n == 6 ? skip_unicode_escape_run(at, end) : at + n;
      auto taken = static_cast<std::size_t>(after - at);
      if (k + taken >= 64) {  // the escapes run into the next block: continue after them
        next = after;
        break;
      }
      stops &= ~(((std::uint64_t{1} << taken) - 1)
                 << k);  // their bytes (a quote or backslash among them) are content
    }
    p = next;
  }
  return p;
}

// The first CR or LF: an SSE event's data line is a chunk of 150-300
// bytes, scanned once per event.
__attribute__((target("avx2"))) inline const char* find_line_end_avx2(const char* p,
                                                                      const char* end) {
  return scan_avx2(p, end, line_ends{});
}

}  // namespace byte_scan_detail
#endif

#ifdef __SSE2__
// The bytes of 16 that end plain JSON string content, as a movemask: a
// quote, a backslash and (a signed compare below 0x20) control characters
// and, as negative numbers, every non-ASCII byte.
inline unsigned plain_string_stops_sse(const char* p) {
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m128i special = _mm_or_si128(
      _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
      _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
  return static_cast<unsigned>(_mm_movemask_epi8(special));
}
#endif

// skip_plain_string_bytes (below) for a string known to be short (an
// object's key): without the wide scan, whose set-up costs more than such a
// string (callgrind: keys read that way cost 114 instructions each in a
// chat chunk).
inline const char* skip_plain_short_string_bytes(const char* p, const char* end) {
#ifdef __SSE2__
  while (end - p >= 16) {
    if (auto mask = plain_string_stops_sse(p)) return p + __builtin_ctz(mask);
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    auto c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return p;
  }
  return end;
}

// The first byte at or after `p` that ends a run of plain JSON string
// content: a quote, a backslash, a control character or any non-ASCII byte
// (which the caller checks as UTF-8).
inline const char* skip_plain_string_bytes(const char* p, const char* end) {
  if (p < end) {  // a stop right here (an escape after an escape) needs no wide load
    auto c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return p;
  }
#ifdef TOKENGATE_AVX2_SCAN
  if (end - p >= 128 && byte_scan_detail::have_avx2())
    p = byte_scan_detail::skip_plain_avx2(p, end);
#endif
  return skip_plain_short_string_bytes(p, end);
}

// skip_plain_string_bytes for the request-body scan, which also steps over
// simple escapes (simple_escape_length): it stops at a quote, a control or
// non-ASCII byte, or an escape that needs the caller's general code.
inline const char* skip_plain_bytes_and_escapes(const char* p, const char* end) {
#ifdef TOKENGATE_AVX2_SCAN
  if (end - p >= 128 && byte_scan_detail::have_avx2())
    p = byte_scan_detail::skip_plain_and_escapes_avx2(p, end);
#endif
  for (;;) {  // the last 64 bytes, or all of them without AVX2
    p = skip_plain_string_bytes(p, end);
    if (p == end || *p != '\\') return p;
    auto n = simple_escape_length(p, end);
    if (n == 0) return p;
    p += n;
  }
}

// Whether every byte of [p, end) is plain string content (none of those
// skip_plain_string_bytes stops at). It loads sixteen bytes at a time and so
// may read up to 15 bytes past `end`: only for callers that know those
// bytes exist (a token's text in a chunk whose remembered tail follows it).
inline bool all_plain_string_bytes_reading_past_end(const char* p, const char* end) {
#ifdef __SSE2__
  for (; p < end; p += 16) {
    auto mask = plain_string_stops_sse(p);
    if (end - p < 16) mask &= (1u << (end - p)) - 1;  // the bytes past `end` do not count
    if (mask) return false;
  }
  return true;
#else
  return skip_plain_string_bytes(p, end) == end;
#endif
}

// The first CR or LF at or after `p`.
inline const char* find_line_end(const char* p, const char* end) {
#ifdef TOKENGATE_AVX2_SCAN
  if (end - p >= 64 && byte_scan_detail::have_avx2())
    p = byte_scan_detail::find_line_end_avx2(p, end);
#endif
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
