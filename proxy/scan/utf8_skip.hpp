#pragma once
// Skipping JSON string content that holds non-ASCII text, 32 bytes a step,
// checking it is valid UTF-8 on the way. A 200 KB prompt in Russian,
// Chinese or French took the request scan's byte-at-a-time path at every
// non-ASCII character (utf8_sequence): 0.2-0.5 GB/s, a millisecond of CPU
// before the first byte goes upstream, against 20 us for the same length
// of English (docs/performance.md, "The body scan 16 to 64 bytes a step").
//
// The check follows the lookup-table method of Keiser and Lemire
// ("Validating UTF-8 in less than one instruction per byte", 2021): each
// byte is classified against the one before it by three 16-entry tables
// (that byte's high and low nibble, this byte's high nibble) whose AND
// names the rules the pair breaks; what a pair cannot tell (a third or
// fourth byte owed to a lead two or three bytes back) is settled by
// comparing with the bytes two and three back. It accepts exactly what
// utf8_sequence accepts (Unicode table 3-7).
#include <cstring>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TOKENGATE_AVX2_UTF8 1
#endif

namespace tokengate {

#ifdef TOKENGATE_AVX2_UTF8
// The three tables of the check (also read by string_skip.hpp's AVX-512
// version), one entry per nibble.
namespace utf8_skip_tables {

// One bit per rule a byte pair can break. Bit 7 (two continuation bytes in
// a row) is an error only where no lead byte two or three back asked for
// it; bit 6 serves two rules that the tables keep apart by lead byte.
enum : unsigned char {
  too_short = 1 << 0,       // a lead byte followed by a non-continuation
  too_long = 1 << 1,        // an ASCII byte followed by a continuation
  overlong_3 = 1 << 2,      // E0 80..9F
  too_large = 1 << 3,       // F4 90..BF, F5..FF 90..BF
  surrogate = 1 << 4,       // ED A0..BF
  overlong_2 = 1 << 5,      // C0 or C1 and a continuation
  overlong_4 = 1 << 6,      // F0 80..8F
  too_large_1000 = 1 << 6,  // F5..FF 80..8F
  two_continuations = 1 << 7,
  any_pair = too_short | too_long | two_continuations,
};

// The rules a pair may break, by the high nibble of its first byte.
inline constexpr unsigned char first_high[16] = {
    // 0x0_ .. 0x7_: ASCII
    too_long, too_long, too_long, too_long, too_long, too_long, too_long, too_long,
    // 0x8_ .. 0xB_: continuation bytes
    two_continuations, two_continuations, two_continuations, two_continuations,
    // 0xC_, 0xD_, 0xE_, 0xF_: leads of two, two, three and four bytes
    too_short | overlong_2, too_short, too_short | overlong_3 | surrogate,
    too_short | too_large | too_large_1000 | overlong_4};

// By the low nibble of its first byte (which lead, among C_, E_ and F_).
inline constexpr unsigned char first_low[16] = {
    any_pair | overlong_3 | overlong_2 | overlong_4,  // C0 E0 F0
    any_pair | overlong_2,                            // C1
    any_pair,
    any_pair,              // F2 F3
    any_pair | too_large,  // F4
    any_pair | too_large | too_large_1000,
    any_pair | too_large | too_large_1000,  // F5 .. FC
    any_pair | too_large | too_large_1000,
    any_pair | too_large | too_large_1000,
    any_pair | too_large | too_large_1000,
    any_pair | too_large | too_large_1000,
    any_pair | too_large | too_large_1000,
    any_pair | too_large | too_large_1000,
    any_pair | too_large | too_large_1000 | surrogate,  // ED (FD)
    any_pair | too_large | too_large_1000,
    any_pair | too_large | too_large_1000};  // FE FF

// By the high nibble of its second byte.
inline constexpr unsigned char second_high[16] = {
    // 0x0_ .. 0x7_ and 0xC_ .. 0xF_: ASCII or a lead, where a continuation may be owed
    too_short,
    too_short,
    too_short,
    too_short,
    too_short,
    too_short,
    too_short,
    too_short,
    too_long | overlong_2 | two_continuations | overlong_3 | too_large_1000 | overlong_4,  // 0x8_
    too_long | overlong_2 | two_continuations | overlong_3 | too_large,                    // 0x9_
    too_long | overlong_2 | two_continuations | surrogate | too_large,                     // 0xA_
    too_long | overlong_2 | two_continuations | surrogate | too_large,                     // 0xB_
    too_short,
    too_short,
    too_short,
    too_short};

}  // namespace utf8_skip_tables

namespace utf8_skip_detail {
using namespace utf8_skip_tables;

// A 16-byte table in both 128-bit lanes, for _mm256_shuffle_epi8.
__attribute__((target("avx2"))) inline __m256i both_lanes(const unsigned char (&table)[16]) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
}

__attribute__((target("avx2"))) inline __m256i by_first_high(__m256i nibbles) {
  return _mm256_shuffle_epi8(both_lanes(first_high), nibbles);
}
__attribute__((target("avx2"))) inline __m256i by_first_low(__m256i nibbles) {
  return _mm256_shuffle_epi8(both_lanes(first_low), nibbles);
}
__attribute__((target("avx2"))) inline __m256i by_second_high(__m256i nibbles) {
  return _mm256_shuffle_epi8(both_lanes(second_high), nibbles);
}

// Non-zero bytes where `block` (with `before`, the 32 bytes preceding it)
// is not valid UTF-8.
__attribute__((target("avx2"))) inline __m256i errors(__m256i block, __m256i before) {
  // The bytes one, two and three back: `block` shifted right across the
  // two 128-bit lanes, filled from the end of `before`.
  __m256i straddle = _mm256_permute2x128_si256(before, block, 0x21);
  __m256i back1 = _mm256_alignr_epi8(block, straddle, 15);
  __m256i back2 = _mm256_alignr_epi8(block, straddle, 14);
  __m256i back3 = _mm256_alignr_epi8(block, straddle, 13);
  const __m256i low_nibble = _mm256_set1_epi8(0x0F);
  __m256i pair_rules = _mm256_and_si256(
      _mm256_and_si256(by_first_high(_mm256_and_si256(_mm256_srli_epi16(back1, 4), low_nibble)),
                       by_first_low(_mm256_and_si256(back1, low_nibble))),
      by_second_high(_mm256_and_si256(_mm256_srli_epi16(block, 4), low_nibble)));
  // A continuation is owed here where the byte two back is E0 or above or
  // the byte three back is F0 or above (bit 7 after a saturating subtract).
  __m256i owed =
      _mm256_or_si256(_mm256_subs_epu8(back2, _mm256_set1_epi8(static_cast<char>(0xE0 - 0x80))),
                      _mm256_subs_epu8(back3, _mm256_set1_epi8(static_cast<char>(0xF0 - 0x80))));
  owed = _mm256_and_si256(owed, _mm256_set1_epi8(static_cast<char>(0x80)));
  // Owed and found (two continuations) cancel; either alone is an error.
  return _mm256_xor_si256(owed, pair_rules);
}

// Where string content ends: a quote, a backslash or (unsigned) a control
// character; non-ASCII bytes are content here.
__attribute__((target("avx2"))) inline unsigned content_stops(__m256i v) {
  __m256i quote_or_backslash = _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('"')),
                                               _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\\')));
  __m256i control = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1F)), v);
  return static_cast<unsigned>(_mm256_movemask_epi8(_mm256_or_si256(quote_or_backslash, control)));
}

__attribute__((target("avx2"))) inline const char* skip_avx2(const char* p, const char* end) {
  const char* start = p;
  __m256i before = _mm256_setzero_si256();  // the caller's byte before `p` is ASCII
  __m256i found = _mm256_setzero_si256();
  for (;;) {
    auto left = static_cast<std::size_t>(end - p);
    __m256i block;
    unsigned stops;
    if (left >= 32) {
      block = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
      stops = content_stops(block);
    } else {
      // The last bytes, padded with blanks: a sequence cut short by the
      // end of the text is then an error like any other.
      alignas(32) char tail[32];
      std::memset(tail, ' ', sizeof tail);
      std::memcpy(tail, p, left);
      block = _mm256_load_si256(reinterpret_cast<const __m256i*>(tail));
      stops = content_stops(block) | ~0u << left;  // (left < 32 here)
    }
    if (stops) {
      // The string's text ends at the stop. The bytes after it are judged
      // too, harmlessly: a valid JSON text is valid UTF-8 as a whole, so an
      // error there means a bad body, which the caller's byte-at-a-time
      // check then finds when it gets there.
      auto at = static_cast<unsigned>(__builtin_ctz(stops));
      found = _mm256_or_si256(found, errors(block, before));
      return _mm256_testz_si256(found, found) ? p + at : start;
    }
    found = _mm256_or_si256(found, errors(block, before));
    before = block;
    p += 32;
  }
}

}  // namespace utf8_skip_detail
#endif

// The first quote, backslash or control character at or after `p` (or
// `end`), having checked that every byte before it is valid UTF-8; `p`
// itself when it cannot vouch for them (a byte that is not, or a processor
// without AVX2), and the caller's byte-at-a-time check takes over there.
// `p` must hold a non-ASCII byte that starts a character (the byte before
// it, if any, is ASCII or ends a whole sequence).
inline const char* skip_utf8_string_bytes(const char* p, const char* end) {
#ifdef TOKENGATE_AVX2_UTF8
  static const bool have_avx2 = __builtin_cpu_supports("avx2");
  if (have_avx2) return utf8_skip_detail::skip_avx2(p, end);
#endif
  (void)end;
  return p;
}

}  // namespace tokengate
