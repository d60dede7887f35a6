#pragma once
// Incremental server-sent-events parser following WHATWG HTML §9.2.5–9.2.6.
// It is fed the response body exactly as it arrives, split anywhere (even
// between the CR and LF of a CRLF), and calls the sink once per dispatched
// event. It only observes: the relay has already forwarded the bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokengate::stream {

struct sse_event {
  std::string_view type;  // "message" when no event: field was given
  std::string_view data;  // data: lines joined by '\n', final '\n' removed
};

class sse_sink {
 public:
  virtual void on_event(const sse_event& event) = 0;

 protected:
  ~sse_sink() = default;
};

class sse_parser {
 public:
  // An event larger than this is not delivered (its bytes still flow to the
  // client); without a bound a hostile upstream could grow memory forever.
  static constexpr std::size_t default_max_event_bytes = 8 * 1024 * 1024;

  explicit sse_parser(std::size_t max_event_bytes = default_max_event_bytes)
      : max_event_bytes_(max_event_bytes) {}

  void feed(std::string_view bytes, sse_sink& sink);

  // True when the bytes seen so far end exactly between two events, so that
  // an event of our own (an error at a mid-stream failure) can follow them.
  bool at_event_boundary() const {
    return line_.empty() && !in_line_ && data_.empty() && type_.empty();
  }
  // True when the bytes seen so far end in the middle of a line.
  bool inside_line() const { return in_line_; }

  // The body ended inside an event: that tail is discarded, as the spec says.
  bool has_incomplete_event() const { return in_line_ || !data_.empty() || !type_.empty(); }

  // Absolute stream offsets (bytes since the first feed). During a sink
  // callback, the event occupies [boundary(), position()). After a feed,
  // boundary() is where the bytes stop being whole events: what follows is
  // the start of an event (or line) still to be completed.
  std::uint64_t boundary() const { return boundary_; }
  std::uint64_t position() const { return fed_ + chunk_offset_; }
  std::uint64_t fed() const { return fed_; }

  std::size_t events_dispatched() const { return events_; }
  std::size_t oversized_events() const { return oversized_; }
  const std::string& last_event_id() const { return last_id_; }

 private:
  void feed_lines(std::string_view bytes, sse_sink& sink);
  bool take_single_line_event(std::string_view bytes, std::size_t& i, sse_sink& sink);
  void process_line(std::string_view line, sse_sink& sink);
  void dispatch(sse_sink& sink);

  std::size_t max_event_bytes_;
  std::string line_;      // a line split across chunks
  bool in_line_ = false;  // bytes of an unfinished line have been seen
  bool skip_lf_ = false;  // the previous chunk ended in CR: a leading LF belongs to it
  bool first_line_ = true;
  bool oversized_event_ = false;
  std::string data_;
  std::string type_;
  std::string last_id_;
  std::size_t events_ = 0;
  std::size_t oversized_ = 0;
  std::size_t chunk_offset_ = 0;
  std::uint64_t fed_ = 0;       // bytes fed before the current chunk
  std::uint64_t boundary_ = 0;  // just past the last line that left no event pending
};

}  // namespace tokengate::stream
