#pragma once
// What an observer learns of a stream (stream_facts), and the one way each
// dialect's reading records what an event carried (observation): text,
// reasoning, tool calls, a finish, usage, an error, the stream's end.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace boost::json {
class value;
}

namespace tokengate::stream {

// What one event carried (bit set).
enum event_kind : unsigned {
  kind_text = 1,
  kind_reasoning = 2,
  kind_tool_call = 4,
  kind_finish = 8,
  kind_usage = 16,
  kind_error = 32,
  kind_done = 64,
  kind_ignored = 128,  // dispatched, but not JSON (e.g. empty data)
};
constexpr unsigned content_kinds = kind_text | kind_reasoning | kind_tool_call;

struct tool_call {
  std::string name;
  std::string arguments;
};

struct stream_facts {
  std::size_t events = 0;
  std::optional<std::size_t> first_content_event;  // TTFT is measured here
  std::optional<std::size_t> first_text_event;
  std::size_t content_events = 0;
  std::size_t text_events = 0, reasoning_events = 0, tool_call_events = 0;
  // Normalised usage: input_tokens counts every prompt token, those read
  // from a prompt cache and written to one included (Anthropic reports
  // them apart: its input_tokens is what neither read nor wrote).
  std::optional<std::int64_t> input_tokens, output_tokens;
  // Anthropic's cache_read_input_tokens and cache_creation_input_tokens, as
  // its dialect reports them (OpenAI's cached_tokens: stream/accounting.hpp).
  std::optional<std::int64_t> cache_read_tokens, cache_write_tokens;
  std::size_t usage_events = 0;
  std::string finish_reason;  // the last one, as the dialect spells it
  std::map<std::int64_t, std::string> finish_by_choice;
  std::string terminator;  // e.g. "data: [DONE]", "event: message_stop"
  bool error = false;

  // Filled only when recording (tests, debugging): the generated content.
  std::vector<unsigned> kinds;
  std::map<std::int64_t, std::string> text_by_choice;
  std::string reasoning_text;
  std::vector<tool_call> tool_calls;
  std::string error_json;

  // A terminator, a finish for every choice seen, and no error. "[DONE]"
  // alone is not success: engines send it after an error too.
  bool ended_properly() const;
};

class observation {
 public:
  explicit observation(bool record) : record_(record) {}

  const stream_facts& facts() const { return facts_; }
  // Recording keeps the decoded content; a dialect's lean reading does not
  // decode it, so a recording observer always reads in full.
  bool recording() const { return record_; }
  // Recording ends (what was kept is let go): a resumable stream past its
  // buffer (stream/accounting.hpp).
  void stop_recording() {
    record_ = false;
    std::map<std::int64_t, std::string>().swap(facts_.text_by_choice);
    std::string().swap(facts_.reasoning_text);
    std::vector<tool_call>().swap(facts_.tool_calls);
    std::vector<unsigned>().swap(facts_.kinds);
  }

  // An event begins and ends; between them the dialect's reading says
  // what it carried.
  void begin_event() { kinds_ = 0; }
  void end_event() {
    auto index = facts_.events++;
    if (kinds_ & kind_usage) ++facts_.usage_events;
    if (kinds_ & content_kinds) {
      ++facts_.content_events;
      if (!facts_.first_content_event) facts_.first_content_event = index;
    }
    if (kinds_ & kind_text) {
      ++facts_.text_events;
      if (!facts_.first_text_event) facts_.first_text_event = index;
    }
    if (kinds_ & kind_reasoning) ++facts_.reasoning_events;
    if (kinds_ & kind_tool_call) ++facts_.tool_call_events;
    if (record_) facts_.kinds.push_back(kinds_);
  }
  unsigned kinds() const { return kinds_; }

  void add_kinds(unsigned kinds) { kinds_ |= kinds; }  // what a lean reading found
  void text(std::int64_t choice, std::string_view text);
  void reasoning(std::string_view text);
  // Tool calls are keyed by (choice, index) for OpenAI and by content
  // block or output index elsewhere: one integer covers both.
  static std::int64_t tool_key(std::int64_t choice, std::int64_t index) {
    return choice * 1'000'000 + index;
  }
  void open_tool_call(std::int64_t key, std::string_view name);
  void tool_arguments(std::int64_t key, std::string_view fragment);
  // (Inline, as end_event: both run for every event of a stream.)
  void finish(std::int64_t choice, std::string_view reason) {
    if (reason.empty()) return;
    kinds_ |= kind_finish;
    facts_.finish_reason.assign(reason);
    facts_.finish_by_choice[choice].assign(reason);
  }
  // Usage as the dialect reports it: both counts replaced (a count the
  // event lacks becomes unknown), or one of them.
  void usage(std::optional<std::int64_t> input, std::optional<std::int64_t> output);
  void input_tokens(std::int64_t n);
  void cache_tokens(std::optional<std::int64_t> read, std::optional<std::int64_t> written) {
    if (read) facts_.cache_read_tokens = read;
    if (written) facts_.cache_write_tokens = written;
  }
  void output_tokens(std::int64_t n);
  void usage_seen() { kinds_ |= kind_usage; }
  void error(const boost::json::value& detail);
  void done(std::string_view terminator);
  void ignored() { kinds_ |= kind_ignored; }

 private:
  bool record_;
  unsigned kinds_ = 0;
  stream_facts facts_;
  std::map<std::int64_t, std::size_t>
      tool_call_slots_;  // tool key → tool_calls position (recording)
};

}  // namespace tokengate::stream
