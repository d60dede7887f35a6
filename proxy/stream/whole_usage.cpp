#include "stream/whole_usage.hpp"

#include <boost/json/parse.hpp>
#include <cstring>

#include "stream/json_fields.hpp"

namespace tokengate::stream {
namespace {

// Backslashes at the end of [begin, end), counted back from end.
std::size_t backslashes_before(const char* begin, const char* end) {
  std::size_t n = 0;
  while (end - n > begin && *(end - n - 1) == '\\') ++n;
  return n;
}

}  // namespace

void whole_usage::feed(std::string_view bytes) {
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  const char* capture_from = p;  // (read only while capturing)
  while (p < end && state_ != state::done) {
    if (in_string_) {
      p = skip_string(p, end);
      continue;
    }
    const bool was_capturing = state_ == state::capturing;
    const char* at = structural(p, end);
    if (!was_capturing && state_ == state::capturing) capture_from = at;
    if (was_capturing && state_ != state::capturing) {
      // (`at` is the byte that ended the value: a ',' or the body's '}')
      captured_.append(capture_from, at - 1);
      if (captured_.size() <= max_usage_bytes) read_captured();
      return;
    }
    p = at;
  }
  if (state_ == state::capturing) {
    captured_.append(capture_from, end);
    if (captured_.size() > max_usage_bytes) state_ = state::done;  // not a usage object
  }
}

// Inside a string: past its closing quote, or to the end of the bytes.
const char* whole_usage::skip_string(const char* p, const char* end) {
  if (escape_owed_) {  // the byte after a backslash is never the string's end
    escape_owed_ = false;
    if (key_may_match_) key_may_match_ = false;  // ("usage" is written without escapes)
    ++p;
  }
  if (key_may_match_) {  // a top-level member's name: short, read byte by byte
    for (; p < end; ++p) {
      if (*p == '"') {
        in_string_ = false;
        key_may_match_ = false;
        if (key_ == "usage" && state_ == state::scanning) state_ = state::after_key;
        return p + 1;
      }
      if (*p == '\\' || key_.size() == 5) {
        key_may_match_ = false;
        break;
      }
      key_ += *p;
    }
    if (p == end) return p;
  }
  // Content: from quote to quote; a quote after an odd run of backslashes
  // is part of the string.
  for (;;) {
    auto* quote = static_cast<const char*>(std::memchr(p, '"', static_cast<std::size_t>(end - p)));
    if (!quote) {
      escape_owed_ = backslashes_before(p, end) % 2 == 1;
      return end;
    }
    if (backslashes_before(p, quote) % 2 == 0) {
      in_string_ = false;
      return quote + 1;
    }
    p = quote + 1;
  }
}

// Outside strings: the structure, byte by byte, up to the next string's
// opening quote (or the end of the usage value, or of the bytes).
const char* whole_usage::structural(const char* p, const char* end) {
  for (; p < end; ++p) {
    const char c = *p;
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (state_ == state::capturing && depth_ == 1 && (c == ',' || c == '}')) {
      state_ = state::done;
      return p + 1;
    }
    if (state_ == state::after_key) {
      state_ = c == ':' ? state::capturing : state::scanning;
      if (state_ == state::capturing) return p + 1;  // the value starts after the colon
    }
    switch (c) {
      case '"':
        in_string_ = true;
        if (depth_ == 1 && state_ == state::scanning) {
          key_.clear();
          key_may_match_ = true;
        }
        return p + 1;
      case '{':
      case '[':
        ++depth_;
        break;
      case '}':
      case ']':
        --depth_;
        break;
      default:
        break;
    }
  }
  return p;
}

void whole_usage::read_captured() {
  boost::system::error_code ec;
  auto value = boost::json::parse(captured_, ec);
  captured_.clear();
  captured_.shrink_to_fit();
  if (ec || !value.is_object()) return;
  const auto& usage = value.get_object();
  auto either = [&](std::string_view one, std::string_view other) {
    auto v = json_fields::integer(&usage, one);
    return v ? v : json_fields::integer(&usage, other);
  };
  input_ = either("input_tokens", "prompt_tokens");
  output_ = either("output_tokens", "completion_tokens");
  const auto* details = json_fields::obj(usage, "prompt_tokens_details");
  if (!details) details = json_fields::obj(usage, "input_tokens_details");
  cached_ = details ? json_fields::integer(details, "cached_tokens")
                    : json_fields::integer(&usage, "cache_read_input_tokens");
  cache_written_ = json_fields::integer(&usage, "cache_creation_input_tokens");
  if (input_ && !details && (cached_ || cache_written_))  // (Anthropic's shape)
    *input_ += cached_.value_or(0) + cache_written_.value_or(0);
}

}  // namespace tokengate::stream
