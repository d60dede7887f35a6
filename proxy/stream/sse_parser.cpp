#include "stream/sse_parser.hpp"

#include <cstring>

#include "scan/byte_scan.hpp"

namespace tokengate::stream {
namespace {

constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";

// Position of the first CR or LF at or after `from`, or npos.
inline std::size_t line_end(std::string_view s, std::size_t from) {
  const char* end = s.data() + s.size();
  const char* at = find_line_end(s.data() + from, end);
  return at == end ? std::string_view::npos : static_cast<std::size_t>(at - s.data());
}

// One line at `at` that starts with `name` (a field and its colon): its
// value (one leading blank dropped) and where the next line starts; LF or
// CRLF endings only, anything else is left to the line-by-line path.
template <std::size_t n>
inline bool field_line(std::string_view bytes, std::size_t at, const char (&name)[n],
                       std::string_view& value, std::size_t& next) {
  constexpr std::size_t length = n - 1;  // (a constant length: the compare is inlined)
  if (bytes.size() - at < length + 1 || std::memcmp(bytes.data() + at, name, length) != 0)
    return false;
  auto end = line_end(bytes, at + length);
  if (end == std::string_view::npos) return false;
  if (bytes[end] == '\n') {
    next = end + 1;
  } else {
    if (end + 1 == bytes.size() || bytes[end + 1] != '\n') return false;
    next = end + 2;
  }
  value = bytes.substr(at + length, end - at - length);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  return true;
}

}  // namespace

void sse_parser::feed(std::string_view bytes, sse_sink& sink) {
  feed_lines(bytes, sink);
  fed_ += bytes.size();
}

void sse_parser::feed_lines(std::string_view bytes, sse_sink& sink) {
  std::size_t i = 0;
  if (skip_lf_ && !bytes.empty()) {
    skip_lf_ = false;
    if (bytes[0] == '\n') {
      i = 1;
      // The LF completes the CRLF that ended the previous chunk: if that line
      // left us between events, the boundary moves past it too, exactly as
      // when the pair arrives in one chunk (found by tests/fuzz/sse_fuzz).
      if (boundary_ == fed_) boundary_ = fed_ + 1;
    }
  }
  // Only a stream's very first line may begin with a byte-order mark; when
  // the stream's first byte says it does not, the first event may take the
  // shortcut too (a short stream has few events).
  if (first_line_ && fed_ == 0 && !bytes.empty() && bytes[0] != utf8_bom[0]) first_line_ = false;
  while (i < bytes.size()) {
    if (line_.empty() && !in_line_ && data_.empty() && type_.empty() && !oversized_event_ &&
        !first_line_ && take_single_line_event(bytes, i, sink))
      continue;
    auto end = line_end(bytes, i);
    if (end == std::string_view::npos) {
      // Keep the unfinished line, but never more than one event's worth.
      if (line_.size() + (bytes.size() - i) <= max_event_bytes_)
        line_.append(bytes.substr(i));
      else
        oversized_event_ = true;
      in_line_ = true;
      return;
    }
    auto piece = bytes.substr(i, end - i);
    chunk_offset_ = end + 1;
    if (bytes[end] == '\r' && end + 1 < bytes.size() && bytes[end + 1] == '\n') ++chunk_offset_;
    if (line_.empty()) {
      process_line(piece, sink);  // the common case: the whole line is in this chunk
    } else {
      if (line_.size() + piece.size() <= max_event_bytes_)
        line_.append(piece);
      else
        oversized_event_ = true;
      process_line(line_, sink);
      line_.clear();
    }
    in_line_ = false;
    if (data_.empty() && type_.empty()) boundary_ = fed_ + chunk_offset_;
    i = end + 1;
    if (bytes[end] == '\r') {
      if (i < bytes.size()) {
        if (bytes[i] == '\n') ++i;
      } else {
        skip_lf_ = true;  // CR was the last byte: an LF may start the next chunk
      }
    }
  }
}

// The event almost every stream is made of: one data line (after an
// `event:` line, as Anthropic sends) and the blank line that ends it, whole
// in this chunk, with nothing pending before it. It is dispatched from the
// chunk's own bytes instead of being copied into data_ line by line (a
// third of the parser's work per event, callgrind); what the sink sees
// (type, data, boundary(), position()) is exactly what the line-by-line
// path gives, which the tests feed byte by byte to compare.
bool sse_parser::take_single_line_event(std::string_view bytes, std::size_t& i, sse_sink& sink) {
  std::string_view type = "message", data;
  std::size_t at = i, next;
  std::size_t starts = i;  // where the event starts for boundary()
  if (bytes[at] == 'e' && field_line(bytes, at, "event:", type, next)) {
    at = next;
    if (type.empty()) {
      type = "message";
      starts = at;  // (an empty type leaves nothing pending, as line by line)
    }
  }
  if (!field_line(bytes, at, "data:", data, next)) return false;
  // The blank line, with the same ending as the data line's.
  if (bytes[next - 1] == '\n' && next - at >= 2 && bytes[next - 2] == '\r') {
    if (bytes.size() - next < 2 || bytes.compare(next, 2, "\r\n") != 0) return false;
    next += 2;
  } else {
    if (next == bytes.size() || bytes[next] != '\n') return false;
    next += 1;
  }
  if (data.size() + 1 > max_event_bytes_) return false;  // counted as oversized line by line
  boundary_ = fed_ + starts;
  chunk_offset_ = next;
  ++events_;
  sink.on_event(sse_event{type, data});
  boundary_ = fed_ + next;
  i = next;
  return true;
}

void sse_parser::process_line(std::string_view line, sse_sink& sink) {
  if (first_line_) {
    first_line_ = false;
    if (line.substr(0, utf8_bom.size()) == utf8_bom) line.remove_prefix(utf8_bom.size());
  }
  if (line.empty()) {
    dispatch(sink);
    return;
  }
  if (line.front() == ':') return;  // a comment: keep-alives live here

  std::string_view field = line, value;
  if (auto colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (data_.size() + value.size() + 1 > max_event_bytes_) {
      oversized_event_ = true;
      return;
    }
    data_.append(value);
    data_.push_back('\n');
  } else if (field == "event") {
    type_.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_.assign(value);
  }
  // "retry" only matters to a browser reconnecting; anything else is ignored
  // by the spec (which is why llama.cpp's old "error:" lines are invisible).
}

void sse_parser::dispatch(sse_sink& sink) {
  if (oversized_event_) {
    ++oversized_;
    oversized_event_ = false;
  } else if (!data_.empty()) {
    std::string_view data(data_);
    data.remove_suffix(1);  // the spec drops the final LF
    ++events_;
    sink.on_event(
        sse_event{type_.empty() ? std::string_view("message") : std::string_view(type_), data});
  }
  data_.clear();
  type_.clear();
}

}  // namespace tokengate::stream
