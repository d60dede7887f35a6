#include "stream/responses_dialect.hpp"

#include <array>
#include <cstring>

#include "stream/json_fields.hpp"
#include "stream/json_pieces.hpp"

namespace tokengate::stream {
namespace {

// The delta events and what a non-empty delta of each carries; the
// observer's full parse reads each of them for its `delta` string alone.
unsigned delta_kind(std::string_view type) {
  if (type == "response.output_text.delta") return kind_text;
  if (type == "response.reasoning_text.delta" || type == "response.reasoning_summary_text.delta")
    return kind_reasoning;
  if (type == "response.function_call_arguments.delta") return kind_tool_call;
  return 0;
}

// A key the reader compares as bytes: printable ASCII without a quote or
// a backslash, so that its bytes are its name (an escaped key is "not sure").
bool plain_key_byte(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; }

constexpr std::size_t max_members = 16;  // the deltas have six to eight

}  // namespace

bool responses_delta_reader::read(std::string_view data, unsigned& kinds) {
  if (!frame_.empty() && learned_.empty() && matches(data, kinds, nullptr)) {
    ++remembered_reads_;
    return true;
  }
  if (!frame_.empty() && !learned_.empty()) {  // the delta after the one learned
    std::array<std::string_view, max_members> values;
    if (matches(data, kinds, values.data())) {
      ++remembered_reads_;
      keep_varying_holes(values.data());
      return true;
    }
  }
  return learn(data, kinds);
}

bool responses_delta_reader::matches(std::string_view data, unsigned& kinds,
                                     std::string_view* values) const {
  const char* p = data.data();
  const char* end = p + data.size();
  std::size_t from = 0;  // in frame_
  bool delta_empty = true;
  for (const auto& h : holes_) {
    std::size_t literal = h.at - from;
    if (static_cast<std::size_t>(end - p) < literal ||
        std::memcmp(p, frame_.data() + from, literal) != 0)
      return false;
    p += literal;
    from = h.at;
    const char* value_end;
    if (h.is_string) {  // (its quotes are in the literals around it)
      bool escaped = false;
      value_end = string_end(p, end, escaped);
      if (!value_end || value_end == end) return false;
    } else {
      auto digits = plain_integer_length(p, end);
      if (digits == 0) return false;
      value_end = p + digits;
    }
    if (h.is_delta) delta_empty = value_end == p;  // (an escape decodes to at least one character)
    if (values) *values++ = std::string_view(p, static_cast<std::size_t>(value_end - p));
    p = value_end;
  }
  std::size_t literal = frame_.size() - from;
  if (static_cast<std::size_t>(end - p) != literal ||
      std::memcmp(p, frame_.data() + from, literal) != 0)
    return false;
  kinds = delta_empty ? 0 : kind_;
  return true;
}

// The second delta read: the values it shares with the first (the item's
// id, the indexes) go back into the frame as bytes to compare, and only
// the holes whose values differ (the sequence number, the text, the
// obfuscation) stay holes. The frame only grows more exact: whatever it
// matches, the frame with every hole matched too. The delta's own hole
// stays whatever it held, as the kinds are read from it.
void responses_delta_reader::keep_varying_holes(const std::string_view* values) {
  std::string frame;
  std::vector<hole> holes;
  std::size_t from = 0;
  for (std::size_t i = 0; i < holes_.size(); ++i) {
    const auto& h = holes_[i];
    frame.append(frame_, from, h.at - from);
    from = h.at;
    std::string_view first(learned_.data() + h.learned_at, h.learned_size);
    if (!h.is_delta && values[i] == first) {
      frame.append(first);
    } else {
      holes.push_back(h);
      holes.back().at = static_cast<std::uint16_t>(frame.size());
    }
  }
  frame.append(frame_, from);
  frame_ = std::move(frame);
  holes_ = std::move(holes);
  std::string().swap(learned_);  // (kept for every open stream: let it go)
}

// One careful pass over a flat object without blanks, building the frame
// as it goes: each step reads one piece and answers false at the first
// thing it does not vouch for.
struct responses_delta_reader::learning {
  responses_delta_reader& r;
  std::string_view data;
  const char* p;
  const char* end;
  const char* literal_from;  // the bytes not yet copied into the frame
  std::array<std::string_view, max_members> keys{};
  std::size_t key_count = 0;
  unsigned kind = 0;
  bool saw_delta = false, delta_empty = true;

  // (Offsets into the frame are 16 bits: a delta event is a few hundred bytes.)
  std::uint16_t offset(const char* at) const {
    return static_cast<std::uint16_t>(at - data.data());
  }

  bool members() {
    for (;;) {
      std::string_view name;
      if (!key(name) || !value(name)) return false;
      // A comma and the next member, or the end.
      if (p == end) return false;
      if (*p != ',') return *p == '}' && p + 1 == end;
      ++p;
    }
  }

  // A plain key, not seen before and not `error`, and its colon.
  bool key(std::string_view& name) {
    if (p == end || *p != '"') return false;
    const char* from = ++p;
    while (p < end && plain_key_byte(static_cast<unsigned char>(*p))) ++p;
    if (p == end || *p != '"') return false;
    name = std::string_view(from, static_cast<std::size_t>(p - from));
    for (std::size_t i = 0; i < key_count; ++i)
      if (keys[i] == name)
        return false;  // duplicates: which one counts is the full parser's business
    if (key_count == max_members || name == "error") return false;
    keys[key_count++] = name;
    ++p;
    if (p == end || *p != ':') return false;
    ++p;
    return p != end;
  }

  bool value(std::string_view name) {
    if (name == "type") return type_value();
    if (*p == '"') return string_value(name == "delta");
    if (name == "delta") return false;  // not a string: the full parse reads no text from it
    if (auto digits = plain_integer_length(p, end); digits > 0) return integer_value(digits);
    return literal_value();
  }

  // The event's type, kept in the frame as it is: one of the deltas.
  bool type_value() {
    if (*p != '"') return false;
    bool escaped = false;
    const char* close = string_end(p + 1, end, escaped);
    if (!close || close == end || escaped) return false;
    kind = delta_kind(std::string_view(p + 1, static_cast<std::size_t>(close - p - 1)));
    p = close + 1;
    return kind != 0;
  }

  // A string: a hole in the frame (the delta's, whose emptiness decides the kinds).
  bool string_value(bool is_delta) {
    bool escaped = false;
    const char* close = string_end(p + 1, end, escaped);
    if (!close || close == end) return false;
    r.frame_.append(literal_from, p + 1);  // up to and with the opening quote
    r.holes_.push_back({static_cast<std::uint16_t>(r.frame_.size()), offset(p + 1),
                        static_cast<std::uint16_t>(close - p - 1), true, is_delta});
    if (is_delta) {
      saw_delta = true;
      delta_empty = close == p + 1;
    }
    p = close;  // the closing quote starts the next literal
    literal_from = p;
    ++p;
    return true;
  }

  // A plain integer: a hole in the frame.
  bool integer_value(std::size_t digits) {
    r.frame_.append(literal_from, p);
    r.holes_.push_back({static_cast<std::uint16_t>(r.frame_.size()), offset(p),
                        static_cast<std::uint16_t>(digits), false, false});
    p += digits;
    literal_from = p;
    return true;
  }

  // `[]`, `null`, `true` or `false`, kept in the frame as they are.
  bool literal_value() {
    for (std::string_view word : {"[]", "null", "true", "false"}) {
      if (static_cast<std::size_t>(end - p) >= word.size() &&
          std::string_view(p, word.size()) == word) {
        p += word.size();
        return true;
      }
    }
    return false;
  }
};

bool responses_delta_reader::learn(std::string_view data, unsigned& kinds) {
  frame_.clear();
  holes_.clear();
  learned_.clear();
  if (data.size() < 2 || data.size() > 0xffff || data.front() != '{' || data.back() != '}')
    return false;
  const char* begin = data.data();
  learning l{*this, data, begin + 1, begin + data.size(), begin};
  if (!l.members() || !l.saw_delta || l.kind == 0) {
    frame_.clear();
    holes_.clear();
    return false;
  }
  frame_.append(l.literal_from, l.end);
  learned_.assign(data);  // (its values, for keep_varying_holes)
  kind_ = l.kind;
  kinds = l.delta_empty ? 0 : l.kind;
  return true;
}

bool responses_reading::read_lean(std::string_view event_type, std::string_view data,
                                  observation& o) {
  if (!event_type.starts_with("response.") || !event_type.ends_with(".delta")) return false;
  unsigned kinds = 0;
  if (!deltas_.read(data, kinds)) return false;
  o.add_kinds(kinds);
  return true;
}

namespace {

// response.completed, .incomplete or .failed: the end, its status or error, the usage.
void read_response_end(const boost::json::value& event, std::string_view type, observation& o) {
  using namespace json_fields;
  if (auto* response = obj(event.get_object(), "response")) {
    if (type == "response.failed") {
      auto* detail = response->if_contains("error");
      o.error(detail ? *detail : event);
    } else {
      o.finish(0, str(*response, "status"));
    }
    if (auto* usage = obj(*response, "usage"))
      o.usage(integer(usage, "input_tokens"), integer(usage, "output_tokens"));
  }
  std::string terminator = "event: ";
  terminator += type;
  o.done(terminator);
}

}  // namespace

void responses_reading::read_full(const boost::json::value& event, observation& o) {
  using namespace json_fields;
  const auto& e = event.get_object();
  auto type = str(e, "type");
  auto output_index = [&] {
    return observation::tool_key(0, integer(&e, "output_index").value_or(0));
  };
  if (type == "response.output_text.delta") {
    o.text(0, str(e, "delta"));
  } else if (type == "response.reasoning_text.delta" ||
             type == "response.reasoning_summary_text.delta") {
    o.reasoning(str(e, "delta"));
  } else if (type == "response.function_call_arguments.delta") {
    o.tool_arguments(output_index(), str(e, "delta"));
  } else if (type == "response.output_item.added") {
    if (auto* item = obj(e, "item"); item && str(*item, "type") == "function_call")
      o.open_tool_call(output_index(), str(*item, "name"));
  } else if (type == "response.completed" || type == "response.incomplete" ||
             type == "response.failed") {
    read_response_end(event, type, o);
  }
}

}  // namespace tokengate::stream
