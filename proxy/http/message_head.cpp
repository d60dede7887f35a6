#include "http/message_head.hpp"

#include <boost/beast/http/error.hpp>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "http/token.hpp"

namespace tokengate {
namespace {

using http::error;

bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// Calls `element` with each comma-separated element of a list value,
// blanks trimmed (empty ones too); stops at the first it returns false for.
template <typename Element>
bool each_element(std::string_view list, Element element) {
  for (;;) {
    auto comma = list.find(',');
    if (!element(trimmed(list.substr(0, comma)))) return false;
    if (comma == std::string_view::npos) return true;
    list.remove_prefix(comma + 1);
  }
}

// The first byte from `p` that may not stand as it is in a field value or
// a reason phrase: a control character (CR, LF and HTAB among them) or DEL.
// Sixteen bytes at a time: a provider's head is a kilobyte or two.
const char* next_control(const char* p, const char* end) {
#ifdef __SSE2__
  const __m128i space = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f);
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // (unsigned: bytes of 0x80 and up, obs-text, pass)
    auto printable =
        static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(v, space), v)));
    auto deleted = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, del)));
    if (auto stop = (~printable & 0xFFFFu) | deleted) return p + __builtin_ctz(stop);
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    auto c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c == 0x7f) return p;
  }
  return end;
}

// Past the bytes from `p` that are letters, digits or dashes, which is
// what almost every field name is made of, sixteen at a time; the name's
// other token characters (and its end) are then looked up a byte at a time.
// A byte at a time through the token table was about 100 instructions a
// field (callgrind, the OpenAI SDK's head); names are mostly under sixteen
// bytes, so one step here usually reaches the colon.
const char* past_name_letters(const char* p, const char* end) {
#ifdef __SSE2__
  // (Signed compares: bytes of 0x80 and up are below every bound.)
  const __m128i case_bit = _mm_set1_epi8(0x20), before_a = _mm_set1_epi8('a' - 1),
                after_z = _mm_set1_epi8('z' + 1), before_0 = _mm_set1_epi8('0' - 1),
                after_9 = _mm_set1_epi8('9' + 1), dash = _mm_set1_epi8('-');
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // Setting the case bit makes exactly the capitals lower-case letters.
    __m128i lower = _mm_or_si128(v, case_bit);
    __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(lower, before_a), _mm_cmpgt_epi8(after_z, lower));
    __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, before_0), _mm_cmpgt_epi8(after_9, v));
    __m128i ok = _mm_or_si128(_mm_or_si128(letter, digit), _mm_cmpeq_epi8(v, dash));
    auto stop = ~static_cast<unsigned>(_mm_movemask_epi8(ok)) & 0xFFFFu;
    if (stop) return p + __builtin_ctz(stop);
    p += 16;
  }
#endif
  return p;
}

}  // namespace

head_scanner::head_scanner(std::span<char> text, message_head& out, error_code& ec,
                           std::size_t max_fields)
    : begin_(text.data()),
      p_(begin_),
      end_(begin_ + text.size()),
      out_(out),
      ec_(ec),
      max_fields_(max_fields) {
  out_.fields.clear();
  // Room for a provider's two dozen fields in one allocation, not six as
  // the vector doubles.
  constexpr std::size_t usual_fields = 32;
  out_.fields.reserve(usual_fields);
  out_.content_length.reset();
  out_.transfer_encoding = out_.chunked = out_.other_codings = out_.connection_close =
      out_.connection_keep_alive = false;
  out_.connection_option_count = 0;
  out_.known_at = {};
  out_.host_fields = 0;
}

head_progress head_scanner::fail(http::error e) {
  ec_ = e;
  return head_progress::failed;
}

bool head_scanner::refuse(http::error e) {
  ec_ = e;
  return false;
}

head_progress head_scanner::fields_and_end(std::size_t& used) {
  for (;;) {
    if (p_ == end_) return head_progress::need_more;
    if (*p_ == '\r') break;  // the blank line, if its LF follows
    if (auto r = field_line(); r != head_progress::done) return r;
  }
  if (end_ - p_ < 2) return head_progress::need_more;
  if (p_[1] != '\n') return fail(error::bad_line_ending);
  p_ += 2;
  used = static_cast<std::size_t>(p_ - begin_);
  return head_progress::done;
}

// field-name ":" OWS field-value OWS CRLF.
head_progress head_scanner::field_line() {
  const char* line = p_;
  char* q = p_ + (past_name_letters(p_, end_) - p_);
  while (q < end_ && http_token_chars[static_cast<unsigned char>(*q)]) ++q;
  if (q == end_) return head_progress::need_more;
  if (*q != ':' || q == p_) return fail(error::bad_field);
  std::string_view name(p_, static_cast<std::size_t>(q - p_));
  p_ = q + 1;
  while (p_ < end_ && is_blank(*p_)) ++p_;
  const char* value = p_;
  const char* last = nullptr;
  if (auto r = rest_of_line(last, true, error::bad_value); r != head_progress::done) return r;
  while (last > value && is_blank(last[-1])) --last;
  if (out_.fields.size() == max_fields_) return fail(error::header_limit);
  auto& f = out_.fields.emplace_back();
  f.name = name;
  f.value = std::string_view(value, static_cast<std::size_t>(last - value));
  f.line = std::string_view(line, static_cast<std::size_t>(p_ - line));
  return note_field(f.name, f.value) ? head_progress::done : head_progress::failed;
}

head_progress head_scanner::rest_of_line(const char*& last, bool folds, http::error refusal) {
  for (;;) {
    char* q = p_ + (next_control(p_, end_) - p_);
    if (q == end_) return head_progress::need_more;
    if (*q == '\t') {
      p_ = q + 1;
      continue;
    }
    if (*q != '\r') return fail(*q == '\n' ? error::bad_line_ending : refusal);
    if (end_ - q < 2) return head_progress::need_more;
    if (q[1] != '\n') return fail(error::bad_line_ending);
    if (folds) {
      if (end_ - q < 3) return head_progress::need_more;  // (the next line's first byte decides)
      if (is_blank(q[2])) {
        q[0] = q[1] = ' ';
        p_ = q + 3;
        continue;
      }
    }
    last = q;
    p_ = q + 2;
    return head_progress::done;
  }
}

// The field just added, if it is one the proxy reads: those that decide the
// body's framing and the connection's fate (false: refused), and the known
// fields. Told apart by length first: most names match none.
bool head_scanner::note_field(std::string_view name, std::string_view value) {
  auto note = [this](known_field known) {
    auto& at = out_.known_at[static_cast<std::size_t>(known)];
    if (at == 0) at = static_cast<std::uint16_t>(out_.fields.size());  // (this field's index + 1)
  };
  switch (name.size()) {
    case 4:
      if (is_named(name, "host")) ++out_.host_fields;
      break;
    case 6:
      if (is_named(name, "expect")) note(known_field::expect);
      break;
    case 9:
      if (is_named(name, "x-api-key")) note(known_field::x_api_key);
      break;
    case 10:
      if (is_named(name, "connection")) return connection(value);
      break;
    case 12:
      if (is_named(name, "content-type"))
        note(known_field::content_type);
      else if (is_named(name, "x-request-id"))
        note(known_field::x_request_id);
      break;
    case 13:
      if (is_named(name, "authorization")) note(known_field::authorization);
      break;
    case 14:
      if (is_named(name, "content-length")) return content_length(value);
      break;
    case 16:
      if (is_named(name, "proxy-connection")) return connection(value);
      break;
    case 17:
      if (is_named(name, "transfer-encoding")) return transfer_encoding(value);
      break;
  }
  return true;
}

// A list of one length, possibly repeated (RFC 9110 §8.6), and the same
// in every Content-Length field.
bool head_scanner::content_length(std::string_view value) {
  if (out_.transfer_encoding) return refuse(error::bad_content_length);
  bool same = true;
  bool ok = each_element(value, [&](std::string_view element) {
    if (element.empty()) return false;
    std::uint64_t v = 0;
    for (char c : element) {
      if (c < '0' || c > '9') return false;
      if (__builtin_mul_overflow(v, 10u, &v) ||
          __builtin_add_overflow(v, static_cast<unsigned>(c - '0'), &v))
        return false;
    }
    if (out_.content_length && *out_.content_length != v) same = false;
    out_.content_length = v;
    return same;
  });
  if (!same) return refuse(error::multiple_content_length);
  if (!ok) return refuse(error::bad_content_length);
  return true;
}

// Codings in order; `chunked` may only come last (RFC 9112 §6.1). Each
// a bare token: the codings of HTTP/1.1 have no parameters, and a value
// like "chunked x" is refused rather than guessed at.
bool head_scanner::transfer_encoding(std::string_view value) {
  // (A field after the one that ended with chunked, even an empty one.)
  if (out_.content_length || out_.chunked) return refuse(error::bad_transfer_encoding);
  out_.transfer_encoding = true;
  bool ok = each_element(value, [&](std::string_view coding) {
    if (coding.empty()) return true;
    if (out_.chunked || !is_http_token(coding))
      return false;  // (a coding after chunked, or not a coding)
    out_.chunked = is_named(coding, "chunked");
    out_.other_codings = out_.other_codings || !out_.chunked;
    return true;
  });
  if (!ok) return refuse(error::bad_transfer_encoding);
  return true;
}

bool head_scanner::connection(std::string_view value) {
  bool ok = each_element(value, [&](std::string_view option) {
    if (option.empty()) return true;
    if (!is_http_token(option)) return false;
    if (is_named(option, "close")) out_.connection_close = true;
    if (is_named(option, "keep-alive")) {
      out_.connection_keep_alive = true;
      return true;
    }
    if (out_.connection_option_count == message_head::max_connection_options) return false;
    out_.connection_options[out_.connection_option_count++] = option;
    return true;
  });
  if (!ok) return refuse(error::bad_value);
  return true;
}

void head_scanner::keep_copy(std::size_t used) {
  out_.bytes.assign(begin_, used);
  for (std::size_t i = 0; i < out_.connection_option_count; ++i)
    out_.connection_options[i] = moved(out_.connection_options[i]);
  for (auto& f : out_.fields) {
    f.name = moved(f.name);
    f.value = moved(f.value);
    f.line = moved(f.line);
  }
}

std::string_view head_scanner::moved(std::string_view v) const {
  return std::string_view(out_.bytes.data() + (v.data() - begin_), v.size());
}

std::string_view message_head::value_of(std::string_view name) const {
  for (const auto& f : fields)
    if (same_name(f.name, name)) return f.value;
  return {};
}

}  // namespace tokengate
