#include "routing/json_scan.hpp"

#include <algorithm>
#include <charconv>

#include "scan/byte_scan.hpp"
#include "scan/string_skip.hpp"
#include "scan/utf8.hpp"
#include "scan/utf8_skip.hpp"

namespace tokengate::routing {
namespace {

class scanner {
 public:
  scanner(std::string_view text, scan_error& error, int max_depth)
      : s_(text), error_(error), max_depth_(max_depth) {}

  std::optional<scanned_object> top() {
    skip_ws();
    if (!peek('{')) return fail("the body must be a JSON object");
    scanned_object object;
    object.open = i_;
    ++i_;
    skip_ws();
    if (peek('}')) {
      object.close = i_++;
      return finish(std::move(object));
    }
    object.members.reserve(8);  // a chat request has about six: one allocation, not four
    for (;;) {
      skip_ws();
      json_member m;
      m.member_begin = i_;
      if (!peek('"')) return fail("expected a member name");
      auto key_begin = i_;
      if (!string()) return std::nullopt;
      m.key = unescape(s_.substr(key_begin + 1, i_ - key_begin - 2));
      skip_ws();
      if (!peek(':')) return fail("expected ':'");
      ++i_;
      skip_ws();
      m.begin = i_;
      auto type = value(1);
      if (!type) return std::nullopt;
      m.type = *type;
      m.end = i_;
      object.members.push_back(std::move(m));
      skip_ws();
      if (peek(',')) {
        ++i_;
        continue;
      }
      if (peek('}')) {
        object.close = i_++;
        return finish(std::move(object));
      }
      return fail("expected ',' or '}'");
    }
  }

  // The offset of the ',' that follows the last top-level member whose
  // value the text holds whole: the text is the start of a body still
  // arriving. npos when no member is whole yet. (A member counts only once
  // its comma is seen: a number at the end of the text may go on.)
  std::size_t whole_members_end() {
    std::size_t last = std::string_view::npos;
    skip_ws();
    if (!peek('{')) return last;
    ++i_;
    for (;;) {
      skip_ws();
      if (!peek('"') || !string()) return last;
      skip_ws();
      if (!peek(':')) return last;
      ++i_;
      skip_ws();
      if (!value(1)) return last;
      skip_ws();
      if (!peek(',')) return last;
      last = i_++;
    }
  }

 private:
  std::optional<scanned_object> finish(scanned_object object) {
    skip_ws();
    if (i_ != s_.size()) return fail("unexpected data after the JSON object");
    return object;
  }

  std::nullopt_t fail(std::string message) {
    record(std::move(message));
    return std::nullopt;
  }
  // The four hex digits of a \u escape at `at`, or nullopt.
  std::optional<unsigned> hex4(std::size_t at) const {
    return tokengate::hex4(s_.substr(std::min(at, s_.size())));
  }
  bool failed(std::string message) {
    record(std::move(message));
    return false;
  }
  void record(std::string message) {
    if (error_.message.empty()) error_ = {i_, std::move(message)};
  }

  bool peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }

  std::optional<json_type> value(int depth) {
    if (depth > max_depth_) return fail("JSON nested too deeply");
    if (i_ >= s_.size()) return fail("unexpected end of JSON");
    switch (s_[i_]) {
      case '{':
        return container('}', depth) ? std::optional(json_type::object) : std::nullopt;
      case '[':
        return container(']', depth) ? std::optional(json_type::array) : std::nullopt;
      case '"':
        return string() ? std::optional(json_type::string) : std::nullopt;
      case 't':
        return literal("true") ? std::optional(json_type::boolean) : std::nullopt;
      case 'f':
        return literal("false") ? std::optional(json_type::boolean) : std::nullopt;
      case 'n':
        return literal("null") ? std::optional(json_type::null) : std::nullopt;
      default:
        return number() ? std::optional(json_type::number) : std::nullopt;
    }
  }

  bool container(char close, int depth) {
    bool is_object = close == '}';
    ++i_;
    skip_ws();
    if (peek(close)) {
      ++i_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (is_object) {
        if (!peek('"')) return failed("expected a member name");
        if (!string()) return false;
        skip_ws();
        if (!peek(':')) return failed("expected ':'");
        ++i_;
        skip_ws();
      }
      if (!value(depth + 1)) return false;
      skip_ws();
      if (peek(',')) {
        ++i_;
        continue;
      }
      if (peek(close)) {
        ++i_;
        return true;
      }
      return failed(is_object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
  }

  // Validates a string: escapes, no raw control characters, valid UTF-8.
  // This loop is where a 200 KB conversation spends its scan. Where the
  // processor has AVX-512, one skip judges all of it 64 bytes a step,
  // escapes and UTF-8 included (string_skip.hpp), and stops only at the
  // string's end or at what it leaves to the code below (a surrogate pair,
  // a fault). Elsewhere, or where it could not start, plain bytes and
  // simple escapes are skipped 64 bytes a step (byte_scan.hpp) and
  // non-ASCII text 32 (utf8_skip.hpp), and what stops them comes below.
  void skip_string_content() {
    const char* here = s_.data() + i_;
    const char* end = s_.data() + s_.size();
    const char* stop = skip_json_string_content(here, end);
    if (stop == here) stop = skip_plain_bytes_and_escapes(here, end);
    i_ = static_cast<std::size_t>(stop - s_.data());
  }

  bool string() {
    ++i_;  // opening quote
#ifdef __SSE2__
    // Most strings (keys, roles, a model's name) end within sixteen plain
    // bytes: one step finds their quote, without the wide scan's set-up,
    // which cost more than such a string (callgrind: strings were 1,850
    // instructions of a benchmark request's scan, 1,000 fewer this way).
    if (s_.size() - i_ >= 16) {
      if (auto stops = plain_string_stops_sse(s_.data() + i_)) {
        auto at = i_ + static_cast<std::size_t>(__builtin_ctz(stops));
        if (s_[at] == '"') {
          i_ = at + 1;
          return true;
        }
      }
    }
#endif
    bool vouched_utf8 = true;  // until a run of non-ASCII text was not (then byte at a time)
    while (i_ < s_.size()) {
      skip_string_content();
      if (i_ >= s_.size()) break;
      auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c == '\\') {
        if (i_ + 1 >= s_.size()) break;
        char e = s_[i_ + 1];
        if (e == 'u') {
          auto unit = hex4(i_ + 2);
          if (!unit) return failed("bad \\u escape");
          i_ += 6;
          // A surrogate must come in a high-low pair: a lone half is not a
          // character, and strict parsers upstream refuse it (found by
          // tests/fuzz/policy_fuzz, checked against Boost.JSON).
          if (*unit >= 0xDC00 && *unit <= 0xDFFF) return failed("lone low surrogate in \\u escape");
          if (*unit >= 0xD800 && *unit <= 0xDBFF) {
            auto low = i_ + 6 <= s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u' ? hex4(i_ + 2)
                                                                                  : std::nullopt;
            if (!low || *low < 0xDC00 || *low > 0xDFFF)
              return failed("lone high surrogate in \\u escape");
            i_ += 6;
          }
          continue;
        }
        if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos)
          return failed("bad escape in string");
        i_ += 2;
        continue;
      }
      if (c < 0x20) return failed("control character in string");
      if (c < 0x80) {
        ++i_;
        continue;
      }
      // Non-ASCII text: skipped in runs, checked as it goes (utf8_skip.hpp);
      // where a run holds a bad sequence, the loop below finds it.
      if (vouched_utf8) {
        auto here = s_.data() + i_;
        auto stop = skip_utf8_string_bytes(here, s_.data() + s_.size());
        if (stop != here) {
          i_ = static_cast<std::size_t>(stop - s_.data());
          continue;
        }
        vouched_utf8 = false;
      }
      // Strict UTF-8 (no overlong forms or encoded surrogates: upstreams
      // refuse them; found by tests/fuzz/policy_fuzz against Boost.JSON).
      auto at = reinterpret_cast<const unsigned char*>(s_.data());
      auto n = utf8_sequence(at + i_, at + s_.size());
      if (n == 0) return failed("invalid UTF-8 in string");
      i_ += n;
    }
    return failed("unterminated string");
  }

  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return failed("invalid literal");
    i_ += word.size();
    return true;
  }

  bool number() {
    auto start = i_;
    if (peek('-')) ++i_;
    if (peek('0'))
      ++i_;
    else if (i_ < s_.size() && s_[i_] >= '1' && s_[i_] <= '9')
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    else
      return failed("invalid value");
    if (peek('.')) {
      ++i_;
      if (!(i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))))
        return failed("invalid number");
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    if (peek('e') || peek('E')) {
      ++i_;
      if (peek('+') || peek('-')) ++i_;
      if (!(i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))))
        return failed("invalid number");
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    return i_ > start;
  }

  static std::string unescape(std::string_view raw) {
    if (raw.find('\\') == std::string_view::npos) return std::string(raw);
    std::string out;
    for (std::size_t k = 0; k < raw.size(); ++k) {
      if (raw[k] != '\\') {
        out.push_back(raw[k]);
        continue;
      }
      char e = raw[++k];
      switch (e) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'u': {
          unsigned code = 0;
          std::from_chars(raw.data() + k + 1, raw.data() + k + 5, code, 16);
          // Names we route on are ASCII; anything else is kept recognisably wrong.
          out.push_back(code < 0x80 ? static_cast<char>(code) : '?');
          k += 4;
          break;
        }
        default:
          out.push_back(e);
      }
    }
    return out;
  }

  std::string_view s_;
  scan_error& error_;
  int max_depth_;
  std::size_t i_ = 0;
};

}  // namespace

const json_member* scanned_object::find(std::string_view key) const {
  // Duplicate keys: the last one wins, as in most JSON parsers (Python's too).
  const json_member* found = nullptr;
  for (const auto& m : members)
    if (m.key == key) found = &m;
  return found;
}

std::optional<scanned_object> scan_object(std::string_view text, scan_error& error, int max_depth) {
  error = {};
  return scanner(text, error, max_depth).top();
}

std::size_t whole_members_end(std::string_view prefix) {
  scan_error ignored;
  return scanner(prefix, ignored, 128).whole_members_end();
}

std::optional<std::string> string_value(std::string_view text, const json_member& m) {
  if (m.type != json_type::string) return std::nullopt;
  auto raw = text.substr(m.begin + 1, m.end - m.begin - 2);
  if (raw.find('\\') == std::string_view::npos)
    return std::string(raw);  // (the usual case: nothing to undo)
  if (raw.find("\\u") != std::string_view::npos) return std::nullopt;
  std::string out;
  for (std::size_t k = 0; k < raw.size(); ++k) {
    if (raw[k] == '\\') {
      char e = raw[++k];
      out.push_back(e == 'n'   ? '\n'
                    : e == 't' ? '\t'
                    : e == 'r' ? '\r'
                    : e == 'b' ? '\b'
                    : e == 'f' ? '\f'
                               : e);
    } else {
      out.push_back(raw[k]);
    }
  }
  return out;
}

std::optional<long long> integer_value(std::string_view text, const json_member& m) {
  if (m.type != json_type::number) return std::nullopt;
  auto raw = text.substr(m.begin, m.end - m.begin);
  long long v = 0;
  auto [p, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), v);
  if (ec != std::errc{} || p != raw.data() + raw.size()) return std::nullopt;
  return v;
}

splice replace_value(const json_member& m, std::string json_value) {
  return {m.begin, m.end, std::move(json_value)};
}

namespace {
// `"key":value`, after `prefix`, in one allocation.
std::string json_member_text(std::string_view prefix, std::string_view key,
                             std::string_view json_value) {
  std::string out;
  out.reserve(prefix.size() + key.size() + json_value.size() + 3);
  out.append(prefix);
  append_json_quoted(out, key);
  out.push_back(':');
  out.append(json_value);
  return out;
}
}  // namespace

splice rewrite_member(const json_member& m, std::string_view key, std::string json_value) {
  return {m.member_begin, m.end, json_member_text("", key, json_value)};
}

splice remove_member(std::string_view text, const scanned_object& object, const json_member& m) {
  // Remove "key": value together with one neighbouring comma.
  auto it = std::find_if(object.members.begin(), object.members.end(),
                         [&](const json_member& x) { return &x == &m; });
  auto pos = static_cast<std::size_t>(it - object.members.begin());
  if (pos + 1 < object.members.size())
    return {m.member_begin, object.members[pos + 1].member_begin, ""};
  if (pos > 0) return {object.members[pos - 1].end, m.end, ""};
  return {m.member_begin, m.end, ""};
}

splice add_member(std::string_view text, const scanned_object& object, std::string_view key,
                  std::string json_value) {
  auto at = object.members.empty() ? object.open + 1 : object.members.back().end;
  return {at, at, json_member_text(object.members.empty() ? "" : ",", key, json_value)};
}

void append_json_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
  std::size_t plain = 0;  // where the run of bytes that need no escape began
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c != '"' && c != '\\' && c >= 0x20) continue;
    out.append(s, plain, i - plain);
    if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    }
    plain = i + 1;
  }
  out.append(s, plain);
  out.push_back('"');
}

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_json_quoted(out, s);
  return out;
}

}  // namespace tokengate::routing
