#pragma once
// Reads what a stream says, in every dialect tokengate meets: OpenAI chat and
// completions (and the engines that speak them: vLLM, llama.cpp, Ollama /v1,
// TGI, DeepSeek), OpenAI Responses, Anthropic messages, llama.cpp's native
// /completion and Ollama's native NDJSON. The shape of each event decides
// how it is read, not the path, because compatible engines differ in detail
// (see tests/fixtures/sse/README.md for the traps).
//
// It only observes: the relay has already forwarded the bytes.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stream/chat_chunk.hpp"
#include "stream/responses_delta.hpp"
#include "stream/sse_parser.hpp"

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
  std::optional<std::int64_t> input_tokens, output_tokens;  // normalised usage
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

class stream_observer final : public sse_sink {
 public:
  // `fast_path`: read OpenAI chat chunks, Anthropic deltas and Responses
  // deltas with the lean readers of chat_chunk.hpp and responses_delta.hpp
  // (off only to compare them with the full parse in tests).
  explicit stream_observer(bool record = false, bool fast_path = true) : record_(record), fast_path_(fast_path) {}

  void on_event(const sse_event& event) override;
  // Ollama's native API streams one JSON object per line, not SSE.
  void feed_ndjson(std::string_view bytes);

  const stream_facts& facts() const { return facts_; }
  // The kinds of the most recent event.
  unsigned last_kinds() const { return last_kinds_; }
  // Events the lean reader answered for (the rest took the full parse).
  std::size_t fast_path_events() const { return fast_path_events_; }

 private:
  void on_json(std::string_view event_type, std::string_view data);
  void open_tool_call(std::int64_t key, std::string_view name);
  void append_tool_arguments(std::int64_t key, std::string_view fragment);
  responses_delta_reader& responses_reader();

  bool record_;
  bool fast_path_;
  std::size_t fast_path_events_ = 0;
  chat_chunk_reader chunk_reader_;  // remembers this stream's chunk shape
  stream_facts facts_;
  unsigned last_kinds_ = 0;
  std::map<std::int64_t, std::size_t> tool_call_slots_;  // (choice, index) key → tool_calls position
  std::string ndjson_line_;
  // Remembers this stream's Responses delta shape; made at the stream's
  // first such delta, so that other streams keep 104 bytes fewer each.
  std::unique_ptr<responses_delta_reader> responses_reader_;
};

}  // namespace tokengate::stream
