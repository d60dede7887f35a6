#include "http/body_decoder.hpp"

#include <algorithm>
#include <boost/beast/http/error.hpp>
#include <cstring>
#include <string_view>

namespace tokengate {

body_decoder body_decoder::with_length(std::uint64_t length) {
  return length == 0 ? none() : body_decoder(state::length, length);
}
body_decoder body_decoder::chunked() { return body_decoder(state::size_line); }
body_decoder body_decoder::until_close() { return body_decoder(state::until_close); }
body_decoder body_decoder::none() { return body_decoder(state::done); }

namespace {

int chunk_size_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whether a chunk extension's quoted strings all close on its line (one
// that does not would, to Beast, run on past the line's end).
bool quotes_close(std::string_view extension) {
  bool quoted = false, escaped = false;
  for (char c : extension) {
    if (escaped)
      escaped = false;
    else if (quoted && c == '\\')
      escaped = true;
    else if (c == '"')
      quoted = !quoted;
  }
  return !quoted;
}

// A chunk's size line without its CRLF: hex digits, then optionally blanks
// and extensions (";name=value", passed over: nothing here uses them).
bool parse_size_line(std::string_view line, std::uint64_t& size) {
  std::size_t i = 0;
  size = 0;
  for (; i < line.size(); ++i) {
    int digit = chunk_size_digit(line[i]);
    if (digit < 0) break;
    if (size >> 60) return false;  // more than 64 bits
    size = size << 4 | static_cast<unsigned>(digit);
  }
  if (i == 0) return false;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  return i == line.size() || (line[i] == ';' && quotes_close(line.substr(i)));
}

// The chunk almost every read holds: "<hex size>\r\n<payload>\r\n", all of
// it in hand, no extension. Returns the size line's length (CRLF included)
// and sets `size`; 0 for anything else, which the general path then reads
// (and judges). A third of the decoder's work per event went to finding
// that line with memchr and walking the states one by one (callgrind).
std::size_t whole_chunk(const char* p, std::size_t n, std::uint64_t& size) {
  constexpr std::size_t max_digits = 15;  // (no overflow)
  std::size_t digits = 0;
  size = 0;
  for (; digits < n && digits < max_digits; ++digits) {
    int digit = chunk_size_digit(p[digits]);
    if (digit < 0) break;
    size = size << 4 | static_cast<unsigned>(digit);
  }
  if (digits == 0 || size == 0 || n - digits < 2 || p[digits] != '\r' || p[digits + 1] != '\n')
    return 0;
  std::size_t line = digits + 2;
  if (n - line < size || n - line - size < 2) return 0;
  if (p[line + size] != '\r' || p[line + size + 1] != '\n') return 0;
  return line;
}

}  // namespace

// (The steps are inlined into decode, which runs for every read of every
// stream: called, they kept the cursor in memory, 20 % more instructions.)
struct body_decoder::cursor {
  char* const base;
  const std::size_t end;
  error_code& ec;
  std::size_t at = 0;   // the next byte to decode
  std::size_t out = 0;  // where the payload so far ends
  result r;
  bool any_payload = false;

  // The payload's first piece stays where it is; later pieces (the next
  // chunks of the same read) move up behind it, over the framing between.
  [[gnu::always_inline]] void take_payload(std::size_t n) {
    if (!any_payload) {
      any_payload = true;
      r.begin = out = at;
    } else if (out != at) {
      std::memmove(base + out, base + at, n);
    }
    out += n;
    at += n;
  }

  // The next line, without its CRLF; false when it has not all arrived
  // (or, with `ec` set, has no CRLF within the bound). As in Beast, a line
  // ends at a CRLF: a bare LF is part of it (and refused by what reads it,
  // unless inside an extension's quoted string, which Beast allows).
  bool next_line(std::string_view& line) {
    auto window = std::min(end - at, max_line);
    for (std::size_t from = 0; from < window;) {
      auto* nl = static_cast<const char*>(std::memchr(base + at + from, '\n', window - from));
      if (!nl) break;
      auto length = static_cast<std::size_t>(nl - (base + at));
      if (length > 0 && base[at + length - 1] == '\r') {
        line = std::string_view(base + at, length - 1);
        at += length + 1;
        return true;
      }
      from = length + 1;
    }
    if (window == max_line) ec = http::error::bad_chunk;
    return false;
  }

  result finish() {
    r.size = any_payload ? out - r.begin : 0;
    r.used = at;
    return r;
  }
};

[[gnu::always_inline]] inline void body_decoder::take_counted(cursor& c) {
  auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left_, c.end - c.at));
  c.take_payload(n);
  left_ -= n;
  if (left_ == 0) state_ = state_ == state::length ? state::done : state::payload_end;
}

[[gnu::always_inline]] inline bool body_decoder::read_size_line(cursor& c) {
  std::uint64_t whole_size;
  if (auto line_length = whole_chunk(c.base + c.at, c.end - c.at, whole_size)) {
    c.at += line_length;
    c.take_payload(static_cast<std::size_t>(whole_size));
    c.at += 2;  // its CRLF
    return true;
  }
  std::string_view line;
  if (!c.next_line(line)) return false;
  std::uint64_t size;
  if (!parse_size_line(line, size)) {
    c.ec = http::error::bad_chunk;
    return false;
  }
  if (size == 0) {
    state_ = state::trailers;
  } else {
    left_ = size;
    state_ = state::payload;
  }
  return true;
}

[[gnu::always_inline]] inline bool body_decoder::read_payload_end(cursor& c) {
  if (c.base[c.at] != '\r' || (c.end - c.at >= 2 && c.base[c.at + 1] != '\n')) {
    c.ec = http::error::bad_chunk;
    return false;
  }
  if (c.end - c.at < 2) return false;  // the LF is still to come
  c.at += 2;
  state_ = state::size_line;
  return true;
}

// Trailer fields, passed over, until the empty line that ends the body.
[[gnu::always_inline]] inline bool body_decoder::read_trailer(cursor& c) {
  std::string_view line;
  if (!c.next_line(line)) return false;
  if (line.empty()) state_ = state::done;
  return true;
}

body_decoder::result body_decoder::decode(std::span<char> bytes, error_code& ec) {
  cursor c{bytes.data(), bytes.size(), ec};
  bool more = true;
  while (more && c.at < c.end && state_ != state::done && !ec) {
    switch (state_) {
      case state::length:
      case state::payload:
        take_counted(c);
        break;
      case state::until_close:
        c.take_payload(c.end - c.at);
        break;
      case state::size_line:
        more = read_size_line(c);
        break;
      case state::payload_end:
        more = read_payload_end(c);
        break;
      case state::trailers:
        more = read_trailer(c);
        break;
      case state::done:
        break;
    }
  }
  return c.finish();
}

void body_decoder::end_of_input(error_code& ec) {
  if (state_ == state::until_close) state_ = state::done;
  if (state_ != state::done) ec = http::error::partial_message;
}

}  // namespace tokengate
