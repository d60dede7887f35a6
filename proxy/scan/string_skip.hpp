#pragma once
// Skipping a JSON string's content 64 bytes a step with AVX-512, every rule
// checked on the way: escapes (\" \\ \/ \b \f \n \r \t, and \u with four
// hex digits), no raw control characters, strict UTF-8.
//
// Why: the AVX2 skips (byte_scan.hpp, utf8_skip.hpp) leave their block at
// every escape, and some prompts are mostly escapes. Source code holds a
// \n or \" every dozen bytes (2.6 GB/s: 77 us of a 200 KB prompt's scan,
// against 7 for English); text written by Python's json module, which
// escapes every non-ASCII character as \u00e9 by default, has one every
// few bytes (1.3 GB/s). Here the escapes are found for a whole block at
// once, as bit masks, the way simdjson finds them, and checked with masks
// too: a block costs the same whatever it holds.
//
// An escape or a character cut by a block's end is finished by the next
// block from a few bits carried over (an odd run of backslashes, a \u's
// digits still owed, UTF-8 continuations owed), so that each block's load
// and classing need not wait for the last block's answers. What the masks
// cannot vouch for (a surrogate pair, whose two escapes must match;
// anything invalid) is left to the caller's byte-at-a-time code, which is
// handed the place where that escape or character starts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "scan/utf8_skip.hpp"
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TOKENGATE_AVX512_STRING 1
#endif

namespace tokengate {

#ifdef TOKENGATE_AVX512_STRING
namespace string_skip_detail {

// What each ASCII byte can be, one bit a class (bytes 0x80 and above are
// told apart by their own mask, not by this table).
enum : unsigned char {
  escape_letter = 1 << 0,  // may follow a backslash: " \ / b f n r t
  u_letter = 1 << 1,       // u, which four hex digits follow
  hex_digit = 1 << 2,
  control = 1 << 3,  // below 0x20: never raw in a string
  quote = 1 << 4,
  backslash = 1 << 5,
  d_digit = 1 << 6,           // d or D: \uD800..\uDFFF are surrogate halves
  surrogate_second = 1 << 7,  // 8..F, the second hex digit of one
};

struct class_table {
  alignas(64) unsigned char bytes[128];
};

constexpr class_table make_classes() {
  class_table t{};
  for (int c = 0; c < 0x20; ++c) t.bytes[c] = control;
  for (char c : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'})
    t.bytes[static_cast<unsigned char>(c)] |= escape_letter;
  t.bytes['u'] |= u_letter;
  for (char c : {'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a',
                 'b', 'c', 'd', 'e', 'f', 'A', 'B', 'C', 'D', 'E', 'F'})
    t.bytes[static_cast<unsigned char>(c)] |= hex_digit;
  t.bytes['"'] |= quote;
  t.bytes['\\'] |= backslash;
  t.bytes['d'] |= d_digit;
  t.bytes['D'] |= d_digit;
  for (char c : {'8', '9', 'a', 'b', 'c', 'd', 'e', 'f', 'A', 'B', 'C', 'D', 'E', 'F'})
    t.bytes[static_cast<unsigned char>(c)] |= surrogate_second;
  return t;
}
inline constexpr class_table classes = make_classes();

// A 16-byte table of utf8_skip.hpp's check in each of the four 128-bit
// lanes, for _mm512_shuffle_epi8.
struct lane_table {
  alignas(64) unsigned char bytes[64];
};
constexpr lane_table in_every_lane(const unsigned char (&t)[16]) {
  lane_table out{};
  for (int i = 0; i < 64; ++i) out.bytes[i] = t[i % 16];
  return out;
}
inline constexpr lane_table first_high_4 = in_every_lane(utf8_skip_tables::first_high);
inline constexpr lane_table first_low_4 = in_every_lane(utf8_skip_tables::first_low);
inline constexpr lane_table second_high_4 = in_every_lane(utf8_skip_tables::second_high);

// Byte i of `block`'s bytes one place earlier, the 64 bytes `before` it
// supplying the first (one two-source byte permutation).
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline __m512i bytes_back_one(
    __m512i before, __m512i block) {
  // Index 63 + i: `before`'s last byte, then `block` (the second source).
  const __m512i index =
      _mm512_set_epi8(126, 125, 124, 123, 122, 121, 120, 119, 118, 117, 116, 115, 114, 113, 112,
                      111, 110, 109, 108, 107, 106, 105, 104, 103, 102, 101, 100, 99, 98, 97, 96,
                      95, 94, 93, 92, 91, 90, 89, 88, 87, 86, 85, 84, 83, 82, 81, 80, 79, 78, 77,
                      76, 75, 74, 73, 72, 71, 70, 69, 68, 67, 66, 65, 64, 63);
  return _mm512_permutex2var_epi8(before, index, block);
}

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline __m512i lookup(const lane_table& t,
                                                                             __m512i nibbles) {
  return _mm512_shuffle_epi8(_mm512_load_si512(t.bytes), nibbles);
}

// Positions in `block` (after the 64 bytes `before`) where the text is not
// valid UTF-8, marked at the byte that shows it: up to three bytes after
// the start of the character at fault (Keiser and Lemire, as in
// utf8_skip.hpp). The continuations owed by the leads of three and four
// bytes are kept as bit masks, `owed` bringing in those the last block's
// leads ask of this one and taking out this block's for the next.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline std::uint64_t utf8_errors(
    __m512i before, __m512i block, std::uint64_t& owed) {
  __m512i back1 = bytes_back_one(before, block);
  const __m512i low_nibble = _mm512_set1_epi8(0x0F);
  __m512i pair_rules = _mm512_and_si512(
      _mm512_and_si512(
          lookup(first_high_4, _mm512_and_si512(_mm512_srli_epi16(back1, 4), low_nibble)),
          lookup(first_low_4, _mm512_and_si512(back1, low_nibble))),
      lookup(second_high_4, _mm512_and_si512(_mm512_srli_epi16(block, 4), low_nibble)));
  std::uint64_t leads_of_3 =
      _mm512_cmpge_epu8_mask(block, _mm512_set1_epi8(static_cast<char>(0xE0)));
  std::uint64_t leads_of_4 =
      _mm512_cmpge_epu8_mask(block, _mm512_set1_epi8(static_cast<char>(0xF0)));
  // A third byte is owed two after a lead of three or four, a fourth three
  // after a lead of four; owed and found (bit 7: two continuations in a
  // row) cancel, and either alone is an error.
  std::uint64_t owed_here = leads_of_3 << 2 | leads_of_4 << 3 | owed;
  owed = leads_of_3 >> 62 | leads_of_4 >> 61;
  std::uint64_t two_continuations = _mm512_movepi8_mask(pair_rules);
  return _mm512_test_epi8_mask(pair_rules, _mm512_set1_epi8(0x7F)) |
         (two_continuations ^ owed_here);
}

// The ASCII bytes whose class (from `classes`) has any of `bits`.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline std::uint64_t has(__m512i cls,
                                                                                std::uint64_t ascii,
                                                                                unsigned bits) {
  return _mm512_mask_test_epi8_mask(ascii, cls, _mm512_set1_epi8(static_cast<char>(bits)));
}

// What one block passes to the next: the text's state at the boundary.
struct carried {
  std::uint64_t escaped =
      0;  // bit 0: the block's first byte is escaped (an odd run of backslashes ended the last)
  std::uint64_t hex_owed = 0;        // the block's first bytes that must be a \u's digits
  std::uint64_t u_late = 0;          // bits 0 and 1: a \u at the last block's bytes 62 and 63
  std::uint64_t d_last = 0;          // bit 0: the last block's byte 63 was d or D
  std::uint64_t utf8_owed = 0;       // continuations the last block's leads ask of this one
  std::uint64_t non_ascii_tail = 0;  // the last block ended in non-ASCII bytes
  std::uint64_t starts = 0;  // where something started in the last block (0 before the first)

  bool inside_something() const { return (escaped | hex_owed | non_ascii_tail) != 0; }
};

// The bytes escaped by a backslash: those after an odd run of backslashes,
// simdjson's way (subtracting each run's start from the odd bit positions
// marks the byte after a run of odd length); `in` is bit 0 when the run
// that ended the last block was odd. `out` gets the same for the next.
inline std::uint64_t escaped_bytes(std::uint64_t backslashes, std::uint64_t in,
                                   std::uint64_t& out) {
  constexpr std::uint64_t odd_bits = 0xAAAAAAAAAAAAAAAAull;
  std::uint64_t run_starts = backslashes & ~in;
  std::uint64_t codes = (((run_starts << 1) | odd_bits) - run_starts) ^ odd_bits;
  out = (codes & backslashes) >> 63;
  return codes ^ (backslashes | in);
}

// The highest position in `starts` at or below `at`, or -1.
inline int last_start_at_or_before(std::uint64_t starts, int at) {
  if (at < 0) return -1;
  std::uint64_t upto = at >= 63 ? starts : starts & ((std::uint64_t{2} << at) - 1);
  return upto ? 63 - __builtin_clzll(upto) : -1;
}

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline const char* skip_avx512(
    const char* const start, const char* const end) {
  const __m512i classes_low = _mm512_load_si512(classes.bytes);
  const __m512i classes_high = _mm512_load_si512(classes.bytes + 64);
  carried last;
  __m512i last_bytes = _mm512_setzero_si512();  // before the string's content: as ASCII
  for (const char* p = start;; p += 64) {
    // The last bytes are padded with zeros, control characters, which stop
    // the skip where the text ends: every path of a block that is not whole
    // returns.
    auto left = static_cast<std::size_t>(end - p);
    __m512i block = left >= 64 ? _mm512_loadu_si512(p)
                               : _mm512_maskz_loadu_epi8((std::uint64_t{1} << left) - 1, p);
    std::uint64_t non_ascii = _mm512_movepi8_mask(block);
    std::uint64_t ascii = ~non_ascii;
    __m512i cls = _mm512_permutex2var_epi8(classes_low, block, classes_high);
    std::uint64_t stops = has(cls, ascii, quote | backslash | control);
    if ((stops | non_ascii) == 0 &&
        !last.inside_something()) {  // plain text throughout, the usual case
      last = carried{.starts = ~std::uint64_t{0}};
      last_bytes = block;
      continue;
    }
    carried next;
    std::uint64_t bad_utf8 = 0;
    if (non_ascii | last.non_ascii_tail) {
      next.utf8_owed = last.utf8_owed;
      bad_utf8 = utf8_errors(last_bytes, block, next.utf8_owed);
      next.non_ascii_tail = non_ascii >> 61;
    }
    std::uint64_t continuation =
        non_ascii
            ? non_ascii & _mm512_cmplt_epu8_mask(block, _mm512_set1_epi8(static_cast<char>(0xC0)))
            : 0;
    std::uint64_t escaped = 0;
    std::uint64_t hex_owed = last.hex_owed;
    std::uint64_t wrong = 0;
    std::uint64_t quotes = 0;
    if (stops | last.escaped | last.hex_owed) {
      // Escapes, quotes or control characters: text with none (all of a
      // Chinese prompt's blocks) needs only the UTF-8 check above.
      escaped = escaped_bytes(has(cls, ascii, backslash), last.escaped, next.escaped);
      wrong = has(cls, ascii, control) | (escaped & ~has(cls, ascii, escape_letter | u_letter));
      std::uint64_t u_escapes = escaped & has(cls, ascii, u_letter);
      if (u_escapes | hex_owed) {
        hex_owed |= u_escapes << 1 | u_escapes << 2 | u_escapes << 3 | u_escapes << 4;
        next.hex_owed = u_escapes >> 63 | u_escapes >> 62 | u_escapes >> 61 | u_escapes >> 60;
        // A surrogate half (\uD800..\uDFFF), marked at its second digit:
        // for the caller, which pairs them.
        std::uint64_t d_digits = has(cls, ascii, d_digit);
        wrong |= (hex_owed & ~has(cls, ascii, hex_digit)) |
                 (has(cls, ascii, surrogate_second) & (d_digits << 1 | last.d_last) &
                  (u_escapes << 2 | last.u_late));
        next.u_late = u_escapes >> 62;
        next.d_last = d_digits >> 63;
      }
      quotes = has(cls, ascii, quote) & ~escaped;
    }
    next.starts = ~(escaped | hex_owed | continuation);  // where an escape or a character may start
    std::uint64_t trouble = wrong | bad_utf8;
    if (quotes && (trouble == 0 || __builtin_ctzll(quotes) < __builtin_ctzll(trouble)))
      return p + __builtin_ctzll(quotes);  // the string's end, all of it valid
    if (trouble) {
      // Handed to the caller where the escape or character at fault
      // starts: up to five bytes before where it showed (a \u's last
      // digit), perhaps in the last block; for UTF-8, up to three.
      int at = wrong ? __builtin_ctzll(wrong) : 64;
      if (bad_utf8) at = std::min(at, __builtin_ctzll(bad_utf8) - 3);
      if (int here = last_start_at_or_before(next.starts, at); here >= 0) return p + here;
      // (The first block has no last block: its `starts` are none.)
      if (int there = last_start_at_or_before(last.starts, 64 + at); there >= 0)
        return p - 64 + there;
      return start;  // the caller starts over where this skip did
    }
    last = next;
    last_bytes = block;
  }
}

}  // namespace string_skip_detail
#endif

// Whether this processor has what skip_json_string_content needs (AVX-512
// BW and VBMI: Intel since Ice Lake, AMD since Zen 4); asked once.
// TOKENGATE_NO_AVX512 in the environment turns the skip off, so that the
// narrower scans it stands in front of can be tested, and compared, on a
// processor that has it.
inline bool json_string_skip_available() {
#ifdef TOKENGATE_AVX512_STRING
  static const bool available = __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vbmi") &&
                                std::getenv("TOKENGATE_NO_AVX512") == nullptr;
  return available;
#else
  return false;
#endif
}

// The first byte at or after `p` (which must start a character or escape
// in a string's content) that this skip cannot vouch for: the string's
// closing quote, where its content is wholly valid, or the start of an
// escape or character the caller must judge itself (a surrogate pair, an
// error, the text's end). `p` itself where the processor lacks AVX-512.
inline const char* skip_json_string_content(const char* p, const char* end) {
#ifdef TOKENGATE_AVX512_STRING
  if (json_string_skip_available()) return string_skip_detail::skip_avx512(p, end);
#endif
  (void)end;
  return p;
}

}  // namespace tokengate
