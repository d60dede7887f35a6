#include "stream/chat_dialect.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "stream/json_fields.hpp"
#include "stream/json_pieces.hpp"

namespace tokengate::stream {
namespace {

// Boost.JSON refuses documents nested deeper than 32; we give up well before.
constexpr int max_depth = 16;

class reader {
 public:
  explicit reader(std::string_view text)
      : begin_(text.data()), p_(begin_), end_(begin_ + text.size()) {}

  // The chunk, from its '{'; or, `resumed`, from `at` bytes in, after
  // members that an earlier read found valid and of no interest (see
  // resumable_prefix).
  bool object(chat_chunk& out, bool resumed = false);
  bool object_resumed_at(std::size_t at, chat_chunk& out) {
    p_ = begin_ + at;
    return object(out, true);
  }
  // How many of the text's first bytes are its '{' and whole members that
  // come before any the reader looks at (`choices`, `usage`), up to and
  // including the comma after the last of them; 0 when there are none.
  // A chunk that starts with the same bytes reads the same from there on.
  std::size_t resumable_prefix() const { return resumable_prefix_; }
  // The strings that decided a choice's `text` (delta.content, text),
  // `reasoning` (delta.reasoning_content or delta.reasoning) or `tool_call`
  // (a function's arguments): how many were read, the content of the
  // last, and which flag it decided; and how many tool-call names were
  // read (a name decides `tool_call` too).
  int text_strings() const { return text_strings_; }
  std::string_view text_string() const { return text_string_; }
  string_role text_string_role() const { return text_string_role_; }
  int tool_names() const { return tool_names_; }
  bool at_end() {
    skip_space();
    return p_ == end_;
  }

 private:
  void skip_space() {
    // (Chunks rarely hold any: one test answers for the usual case.)
    if (p_<end_&& static_cast<unsigned char>(*p_)> ' ') return;
    while (p_ < end_ && is_json_blank(*p_)) ++p_;
  }
  bool next_is(char c) {
    skip_space();
    return p_ < end_ && *p_ == c;
  }
  bool take(char c) {
    if (!next_is(c)) return false;
    ++p_;
    return true;
  }

  bool string(std::string_view& raw, bool& escaped);
  bool string() {
    std::string_view raw;
    bool escaped;
    return string(raw, escaped);
  }
  bool integer(std::optional<std::int64_t>& value);
  bool number();
  bool literal(std::string_view word);
  bool value();  // any JSON value, validated and skipped
  // Members of an object whose '{' was just taken (or, `after_comma`, the
  // rest of them after a member's comma); `member` reads each value and
  // returns false to give up.
  template <typename Member>
  bool members(Member member, bool after_comma = false);
  void note_first_looked_at_member(std::string_view name);
  bool key(std::string_view& name);

  bool choice(chat_chunk::choice& c);
  bool delta(chat_chunk::choice& c);
  bool tool_calls(chat_chunk::choice& c);
  bool usage(chat_chunk& out);
  // A value read only for its type: a string gives its raw bytes, an
  // integer its value, anything else is validated and skipped.
  bool string_or_skip(std::string_view& raw, bool& escaped, bool& is_string);
  bool integer_or_skip(std::optional<std::int64_t>& value);
  void note_text_string(std::string_view raw, string_role role) {
    ++text_strings_;
    text_string_ = raw;
    text_string_role_ = role;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  std::size_t resumable_prefix_ = 0;
  bool looked_at_a_member_ = false;
  int depth_ = 0;  // objects and arrays open around the reader
  int text_strings_ = 0;
  std::string_view text_string_;
  string_role text_string_role_ = string_role::text;
  int tool_names_ = 0;
};

bool reader::string(std::string_view& raw, bool& escaped) {
  if (!take('"')) return false;
  escaped = false;
  const char* close = string_end(p_, end_, escaped);
  if (!close || close == end_) return false;
  raw = std::string_view(p_, static_cast<std::size_t>(close - p_));
  p_ = close + 1;
  return true;
}

bool reader::integer(std::optional<std::int64_t>& value) {
  skip_space();
  auto digits = plain_integer_length(p_, end_);
  if (digits == 0) return false;
  // (Only vouched-for digits are added up: adding a 19th first overflowed,
  // found by tests/fuzz/sse_fuzz.)
  std::int64_t v = 0;
  for (; digits > 0; --digits) v = v * 10 + (*p_++ - '0');
  value = v;
  return true;
}

// Any number this reader can vouch for: an optional minus, up to 18 integer
// digits without a leading zero, an optional fraction, no exponent (an
// exponent may overflow, which the full parser refuses).
bool reader::number() {
  skip_space();
  if (p_ < end_ && *p_ == '-') ++p_;
  const char* begin = p_;
  while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
  auto digits = p_ - begin;
  if (digits == 0 || digits > 18 || (digits > 1 && *begin == '0')) return false;
  if (p_ < end_ && *p_ == '.') {
    ++p_;
    const char* fraction = p_;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    if (p_ == fraction || p_ - fraction > 18) return false;
  }
  return !(p_ < end_ && (*p_ == 'e' || *p_ == 'E'));
}

bool reader::literal(std::string_view word) {
  skip_space();
  if (static_cast<std::size_t>(end_ - p_) < word.size() ||
      std::string_view(p_, word.size()) != word)
    return false;
  p_ += word.size();
  return true;
}

bool reader::value() {
  skip_space();
  if (p_ == end_) return false;
  switch (*p_) {
    case '"':
      return string();
    case '{':
      ++p_;
      return members([&](std::string_view) { return value(); });
    case '[': {
      if (depth_ == max_depth) return false;
      ++p_;
      ++depth_;
      bool ok = take(']');
      if (!ok) {
        do {
          if (!value()) return false;
        } while (take(','));
        ok = take(']');
      }
      --depth_;
      return ok;
    }
    case 't':
      return literal("true");
    case 'f':
      return literal("false");
    case 'n':
      return literal("null");
    default:
      return number();
  }
}

bool reader::key(std::string_view& name) {
  if (!take('"')) return false;
  const char* close = skip_plain_short_string_bytes(p_, end_);
  // Anything but the closing quote is left to the full parse: an escape
  // might spell a name we look for, and chunks' keys are plain ASCII.
  if (close == end_ || *close != '"') return false;
  name = std::string_view(p_, static_cast<std::size_t>(close - p_));
  p_ = close + 1;
  return take(':');
}

template <typename Member>
bool reader::members(Member member, bool after_comma) {
  if (depth_ == max_depth) return false;
  ++depth_;
  bool ok = !after_comma && take('}');
  if (!ok) {
    do {
      std::string_view name;
      if (!key(name) || !member(name)) return false;
    } while (take(','));
    ok = take('}');
  }
  --depth_;
  return ok;
}

bool reader::string_or_skip(std::string_view& raw, bool& escaped, bool& is_string) {
  escaped = false;
  is_string = next_is('"');
  if (is_string) return string(raw, escaped);
  return value();
}

bool reader::integer_or_skip(std::optional<std::int64_t>& value_out) {
  skip_space();
  if (p_ < end_ && (*p_ == '-' || (*p_ >= '0' && *p_ <= '9'))) return integer(value_out);
  value_out.reset();  // not a number: the full parse reads no count either
  return value();
}

// One member name may appear once: a repeated one is left to the full parser.
struct seen_once {
  unsigned bits = 0;
  bool first(unsigned bit) {
    if (bits & bit) return false;
    bits |= bit;
    return true;
  }
};

// delta.tool_calls: an array of calls, each with a `function` object whose
// non-empty `name` or `arguments` string makes the choice a tool call (as
// the full parse reads them; other members and non-object elements are
// validated and skipped).
bool reader::tool_calls(chat_chunk::choice& c) {
  if (!take('[')) return value();  // not an array: no calls
  if (depth_ == max_depth) return false;
  ++depth_;
  bool ok = take(']');
  if (!ok) {
    do {
      if (!next_is('{')) {
        if (!value()) return false;
        continue;
      }
      ++p_;
      seen_once call_seen;
      bool call_ok = members([&](std::string_view name) {
        if (name != "function") return value();
        if (!call_seen.first(1)) return false;
        if (!take('{')) return value();
        seen_once function_seen;
        return members([&](std::string_view field) {
          bool is_name = field == "name";
          if (!is_name && field != "arguments") return value();
          if (!function_seen.first(is_name ? 1 : 2)) return false;
          std::string_view raw;
          bool escaped, is_string;
          if (!string_or_skip(raw, escaped, is_string)) return false;
          if (is_string && !raw.empty()) c.tool_call = true;
          if (is_string && is_name) ++tool_names_;
          if (is_string && !is_name) note_text_string(raw, string_role::arguments);
          return true;
        });
      });
      if (!call_ok) return false;
    } while (take(','));
    ok = take(']');
  }
  --depth_;
  return ok;
}

bool reader::delta(chat_chunk::choice& c) {
  seen_once seen;
  return members([&](std::string_view name) {
    unsigned bit = name == "content"             ? 1
                   : name == "reasoning_content" ? 2
                   : name == "reasoning"         ? 4
                                                 : 0;
    if (name == "tool_calls") return seen.first(8) && tool_calls(c);
    if (bit == 0) return value();
    if (!seen.first(bit)) return false;
    std::string_view raw;
    bool escaped, is_string;
    if (!string_or_skip(raw, escaped, is_string)) return false;
    // (An escape decodes to at least one character: empty stays empty.)
    if (is_string && !raw.empty()) (bit == 1 ? c.text : c.reasoning) = true;
    if (is_string) note_text_string(raw, bit == 1 ? string_role::text : string_role::reasoning);
    return true;
  });
}

bool reader::choice(chat_chunk::choice& c) {
  seen_once seen;
  return members([&](std::string_view name) {
    std::string_view raw;
    bool escaped, is_string;
    if (name == "index") {
      std::optional<std::int64_t> index;
      if (!seen.first(1) || !integer_or_skip(index)) return false;
      c.index = index.value_or(0);
      return true;
    }
    if (name == "delta") {
      if (!seen.first(2)) return false;
      if (take('{')) return delta(c);
      return value();
    }
    if (name == "text") {
      if (!seen.first(4) || !string_or_skip(raw, escaped, is_string)) return false;
      if (is_string && !raw.empty()) c.text = true;
      if (is_string) note_text_string(raw, string_role::text);
      return true;
    }
    if (name == "finish_reason") {
      if (!seen.first(8) || !string_or_skip(raw, escaped, is_string) || escaped) return false;
      if (is_string) c.finish_reason = raw;
      return true;
    }
    return value();
  });
}

bool reader::usage(chat_chunk& out) {
  seen_once seen;
  return members([&](std::string_view name) {
    if (name == "prompt_tokens") return seen.first(1) && integer_or_skip(out.prompt_tokens);
    if (name == "completion_tokens") return seen.first(2) && integer_or_skip(out.completion_tokens);
    return value();
  });
}

void reader::note_first_looked_at_member(std::string_view name) {
  if (std::exchange(looked_at_a_member_, true)) return;
  // The member's key starts at its opening quote, right before `name` (a
  // key has no escapes); a comma before it (and any blanks) ends the one
  // before.
  const char* key = name.data() - 1;
  const char* q = key;
  while (q > begin_ && (q[-1] == ' ' || q[-1] == '\n' || q[-1] == '\r' || q[-1] == '\t')) --q;
  if (q > begin_ && q[-1] == ',') resumable_prefix_ = static_cast<std::size_t>(q - begin_);
}

bool reader::object(chat_chunk& out, bool resumed) {
  if (!resumed && !take('{')) return false;
  seen_once seen;
  bool has_choices = false;
  bool ok = members(
      [&](std::string_view name) {
        // These change how the event is read (errors, Anthropic, Responses).
        if (name == "type" || name == "error") return false;
        if (name == "choices" || name == "usage") note_first_looked_at_member(name);
        if (name == "choices") {
          if (!seen.first(1) || !take('['))
            return false;  // choices that are not an array: not this shape
          has_choices = true;
          if (take(']')) return true;
          do {
            if (!next_is('{')) {
              if (!value()) return false;  // a choice that is not an object is skipped
              continue;
            }
            ++p_;
            if (out.choice_count == chat_chunk::max_choices) return false;
            if (!choice(out.add_choice())) return false;
          } while (take(','));
          return take(']');
        }
        if (name == "usage") {
          if (!seen.first(2)) return false;
          if (!take('{')) return value();  // null usage: none
          out.usage = true;
          return usage(out);
        }
        return value();
      },
      resumed);
  return ok && has_choices;
}

}  // namespace

bool read_chat_chunk(std::string_view data, chat_chunk& out) {
  out.reset();
  reader r(data);
  return r.object(out) && r.at_end();
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Whether `bytes` lie right before `at`, no further back than `floor`.
bool bytes_end_at(const char* floor, const char* at, std::string_view bytes) {
  return static_cast<std::size_t>(at - floor) >= bytes.size() &&
         std::memcmp(at - bytes.size(), bytes.data(), bytes.size()) == 0;
}

// The plain integer (what plain_integer_length vouches for: 1 to 18
// digits, no leading zero) whose digits end at `end`, no further back than
// `floor`; null when there is none. The bytes before it are the caller's
// to check: there the remembered ones end with `:`, so no sign, fraction
// or exponent can hide in front.
const char* plain_integer_ending_at(const char* floor, const char* end) {
  const char* limit =
      end - std::min<std::ptrdiff_t>(19, end - floor);  // (a 19th digit looked at, to refuse it)
  const char* p = end;
  while (p > limit && is_digit(p[-1])) --p;
  auto digits = end - p;
  return digits >= 1 && digits <= 18 && (digits == 1 || *p != '0') ? p : nullptr;
}

std::int64_t digits_value(const char* p, const char* end) {
  std::int64_t v = 0;
  for (; p < end; ++p) v = v * 10 + (*p - '0');
  return v;
}

}  // namespace

const char* chat_chunk_reader::remembered_content_end(
    std::string_view data, std::optional<std::int64_t>& prompt_tokens,
    std::optional<std::int64_t>& completion_tokens) const {
  std::string_view frame(frame_);
  auto before = frame.substr(0, before_), after = frame.substr(before_);
  if (frame.empty() || data.size() < frame.size() || !data.starts_with(before)) return nullptr;
  if (tail_hole_count_ == 0)
    return data.ends_with(after) ? data.data() + data.size() - after.size() : nullptr;
  // The holes are found from the end, each after the remembered bytes that
  // follow it: a string back to the last quote before those bytes, an
  // integer over its digits. The remembered bytes before each must end
  // there. (A quote inside the string would be escaped, so would follow a
  // backslash, and the remembered bytes before a string end with `:"`:
  // then no match.)
  const char* content = data.data() + before.size();
  const char* at = data.data() + data.size();
  std::size_t piece_end = after.size();
  for (std::size_t i = tail_hole_count_; i-- > 0;) {
    auto piece = after.substr(tail_holes_[i], piece_end - tail_holes_[i]);
    piece_end = tail_holes_[i];
    if (!bytes_end_at(content, at, piece)) return nullptr;
    const char* value_end = at - piece.size();
    const char* value;
    if (string_holes_ & (1u << i)) {
      auto quote =
          std::string_view(content, static_cast<std::size_t>(value_end - content)).rfind('"');
      if (quote == std::string_view::npos) return nullptr;
      value = content + quote + 1;
      bool escaped = false;
      if (string_end(value, value_end, escaped) != value_end) return nullptr;
    } else {
      value = plain_integer_ending_at(content, value_end);
      if (!value) return nullptr;
      if (i == prompt_hole_) prompt_tokens = digits_value(value, value_end);
      if (i == completion_hole_) completion_tokens = digits_value(value, value_end);
    }
    at = value;
  }
  auto first = after.substr(0, piece_end);
  return bytes_end_at(content, at, first) ? at - first.size() : nullptr;
}

namespace {
// The flag of a choice that a string in `role` decides.
bool& decided_flag(chat_chunk::choice& c, string_role role) {
  switch (role) {
    case string_role::reasoning:
      return c.reasoning;
    case string_role::arguments:
      return c.tool_call;
    case string_role::text:
      break;
  }
  return c.text;
}
}  // namespace

bool chat_chunk_reader::read(std::string_view data, chat_chunk& out) {
  std::string_view frame(frame_);
  auto after = frame.substr(before_);
  std::optional<std::int64_t> prompt_tokens, completion_tokens;  // where they are holes
  if (const char* end = remembered_content_end(data, prompt_tokens, completion_tokens)) {
    const char* begin = data.data() + before_;
    bool escaped = false;
    // A string that closes exactly where the remembered bytes (which
    // begin with its closing quote) take over; nullptr: not vouched for,
    // an earlier quote: the chunk is not shaped as remembered. A token's
    // text is usually plain ASCII, checked sixteen bytes at once where the
    // remembered tail leaves room to read past it.
    constexpr std::size_t slack = 15;
    bool plain = after.size() >= slack && all_plain_string_bytes_reading_past_end(begin, end);
    if (plain || string_end(begin, end, escaped) == end) {
      out.reset();
      auto& choice = out.add_choice() = remembered_choice_;
      decided_flag(choice, remembered_role_) = begin != end;
      out.usage = remembered_usage_;
      // Counts that are holes were read from this chunk's own digits.
      out.prompt_tokens =
          prompt_hole_ == max_tail_holes ? remembered_prompt_tokens_ : prompt_tokens;
      out.completion_tokens =
          completion_hole_ == max_tail_holes ? remembered_completion_tokens_ : completion_tokens;
      ++remembered_reads_;
      return true;
    }
  }
  // Read in full; but where the chunk starts with the remembered one's
  // members before `choices` (id, object, created, model: the same bytes
  // in every chunk of a stream, which the chunks that change shape, a
  // stream's first and last few, repeat too), from after those.
  out.reset();
  reader r(data);
  bool same_start = resumable_prefix_ > 0 && data.starts_with(frame.substr(0, resumable_prefix_));
  if (same_start ? !r.object_resumed_at(resumable_prefix_, out) : !r.object(out)) return false;
  if (!r.at_end()) return false;
  resumed_reads_ += same_start;
  // Only a chunk whose one variable part is its content string; one with a
  // finish reason would also need its view moved into the new bytes.
  constexpr std::size_t longest_remembered = 512;
  // Arguments only where no name also decides `tool_call`.
  if (r.text_strings() == 1 && out.choice_count == 1 && out.choices[0].finish_reason.empty() &&
      data.size() <= longest_remembered &&
      !(r.text_string_role() == string_role::arguments && r.tool_names() > 0)) {
    auto content = r.text_string();
    auto start = static_cast<std::size_t>(content.data() - data.data());
    frame_.assign(data.substr(0, start));
    frame_.append(data.substr(start + content.size()));
    before_ = start;
    remember_tail_holes();
    resumable_prefix_ = r.resumable_prefix();  // (within the bytes before the content string)
    remembered_choice_ = out.choices[0];
    remembered_usage_ = out.usage;
    remembered_prompt_tokens_ = out.prompt_tokens;
    remembered_completion_tokens_ = out.completion_tokens;
    remembered_role_ = r.text_string_role();
  }
  return true;
}

// The remembered chunk's last members, under keys of plain characters,
// give the holes, walked back from its end: each one's value when a string
// or a plain integer, or each count of a flat object of plain integers
// (and nulls), as usage sent with every chunk is; the walk stops at the
// first member of another kind, whose bytes stay remembered as they are.
// The chunk was read whole and valid, with no blanks before its last
// brace, so the value just before that brace, or just before the comma
// ahead of a member's key, is a top-level member's: a string's opening
// quote is the last quote before its closing one (a quote inside it is
// escaped, so follows a backslash, never `:`), an integer's digits run
// back to the `:`, and a flat object (no brace inside) opens at the last
// `{`. Any key will do: the reader looks at `choices` only for an array,
// `usage` only for an object (and then at its counts, taken from the
// holes), and a chunk with `type` or `error` is never remembered.
namespace {

bool is_plain_key_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
}

// Whether `text` ends with `"key":` after `lead` (',' for a member that
// follows another, '{' for an object's first), the key's bytes plain;
// the key, or nullopt.
std::optional<std::string_view> member_key_before(std::string_view text, char lead) {
  if (!text.ends_with("\":")) return std::nullopt;
  auto close = text.size() - 2;
  auto open = close;
  while (open > 0 && is_plain_key_byte(text[open - 1])) --open;
  if (open < 2 || text[open - 1] != '"' || text[open - 2] != lead) return std::nullopt;
  return text.substr(open, close - open);
}

// A value left out of the remembered bytes: where it stood in the bytes
// after the content, how long it was, and whether a string's (or an
// integer's).
struct tail_hole {
  std::size_t at = 0, length = 0;
  bool string = false;
};

// The members of the flat object from `open` to the end of `text` (its
// '}'): `{"key":count,...}` with plain keys and plain integers (or
// nulls); each integer is a hole, and the places of prompt_tokens' and
// completion_tokens' are noted. False for anything else.
bool count_holes(std::string_view text, std::size_t open, tail_hole* holes, std::size_t& count,
                 std::size_t room, std::size_t& prompt_at, std::size_t& completion_at) {
  std::size_t p = open + 1, end = text.size() - 1;
  if (p == end) return true;  // {}: nothing varies
  while (true) {
    auto colon = text.find(':', p);
    if (colon == std::string_view::npos || colon > end) return false;
    auto key = member_key_before(text.substr(0, colon + 1), text[p - 1]);
    if (!key || p + key->size() + 3 != colon + 1) return false;  // not "key": right here
    p = colon + 1;
    if (text.substr(p).starts_with("null")) {
      p += 4;
    } else {
      auto digits = plain_integer_length(text.data() + p, text.data() + end);
      if (digits == 0 || count == room) return false;
      if (*key == "prompt_tokens") prompt_at = p;
      if (*key == "completion_tokens") completion_at = p;
      holes[count++] = {p, digits, false};
      p += digits;
    }
    if (p == end) return true;
    if (text[p] != ',') return false;
    ++p;
  }
}

}  // namespace

void chat_chunk_reader::remember_tail_holes() {
  tail_hole_count_ = 0;
  string_holes_ = 0;
  prompt_hole_ = completion_hole_ = max_tail_holes;
  std::string_view after(frame_);
  after.remove_prefix(before_);
  if (!after.ends_with('}')) return;
  tail_hole found[max_tail_holes];  // in order, the last member's last
  std::size_t count = 0;
  constexpr std::size_t none = std::string_view::npos;
  std::size_t prompt_at = none, completion_at = none;
  // Each member, from the last: its value ends where `members` does.
  for (auto members = after.substr(0, after.size() - 1);;) {
    tail_hole here[max_tail_holes];
    std::size_t here_count = 0, value_begin;
    std::size_t member_prompt_at = none, member_completion_at = none;
    if (members.ends_with('}')) {
      value_begin = members.rfind('{');
      if (value_begin == none ||
          !count_holes(members, value_begin, here, here_count, max_tail_holes - count,
                       member_prompt_at, member_completion_at))
        break;
    } else if (members.ends_with('"')) {
      auto quote = members.substr(0, members.size() - 1).rfind('"');
      if (quote == none) break;
      value_begin = quote;
      here[here_count++] = {quote + 1, members.size() - 1 - (quote + 1), true};
    } else {
      value_begin = members.size();
      while (value_begin > 0 && is_digit(members[value_begin - 1])) --value_begin;
      if (value_begin == members.size()) break;
      here[here_count++] = {value_begin, members.size() - value_begin, false};
    }
    auto key = member_key_before(members.substr(0, value_begin), ',');
    if (!key || count + here_count > max_tail_holes) break;
    std::move_backward(found, found + count, found + count + here_count);
    std::copy(here, here + here_count, found);
    count += here_count;
    if (*key == "usage") {
      prompt_at = member_prompt_at;
      completion_at = member_completion_at;
    }
    members = members.substr(0, value_begin - key->size() - 4);  // up to the comma before the key
  }
  // Taken out from the last, so that the earlier ones keep their places;
  // each hole's place is then where it stands without the values before it.
  for (std::size_t i = count; i-- > 0;) frame_.erase(before_ + found[i].at, found[i].length);
  std::size_t removed = 0;
  for (std::size_t i = 0; i < count; ++i) {
    tail_holes_[i] = static_cast<std::uint16_t>(found[i].at - removed);
    removed += found[i].length;
    if (found[i].string) string_holes_ = static_cast<std::uint8_t>(string_holes_ | (1u << i));
    if (found[i].at == prompt_at) prompt_hole_ = static_cast<std::uint8_t>(i);
    if (found[i].at == completion_at) completion_hole_ = static_cast<std::uint8_t>(i);
  }
  tail_hole_count_ = static_cast<std::uint8_t>(count);
}

namespace {

void read_tool_calls(const json_fields::json::array& calls, std::int64_t choice, observation& o) {
  using namespace json_fields;
  for (const auto& call : calls) {
    if (!call.is_object()) continue;
    auto key = observation::tool_key(choice, integer(&call.get_object(), "index").value_or(0));
    auto* function = obj(call.get_object(), "function");
    if (!function) continue;
    if (auto name = str(*function, "name"); !name.empty()) o.open_tool_call(key, name);
    o.tool_arguments(key, str(*function, "arguments"));
  }
}

}  // namespace

void chat_reading::read_full(const boost::json::value& event, observation& o) {
  using namespace json_fields;
  const auto& e = event.get_object();
  auto* choices = arr(e, "choices");
  if (!choices) return;
  for (const auto& c : *choices) {
    if (!c.is_object()) continue;
    const auto& choice = c.get_object();
    auto n = integer(&choice, "index").value_or(0);
    if (auto* delta = obj(choice, "delta")) {
      o.text(n, str(*delta, "content"));
      o.reasoning(str(*delta, "reasoning_content"));  // DeepSeek's and llama.cpp's spelling
      o.reasoning(str(*delta, "reasoning"));          // vLLM's and OpenRouter's
      if (auto* calls = arr(*delta, "tool_calls")) read_tool_calls(*calls, n, o);
    }
    o.text(n, str(choice, "text"));  // completions
    o.finish(n, str(choice, "finish_reason"));
  }
  if (auto* usage = obj(e, "usage"))
    o.usage(integer(usage, "prompt_tokens"), integer(usage, "completion_tokens"));
}

}  // namespace tokengate::stream
