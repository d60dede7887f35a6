#pragma once
// Reads what a stream says, in the dialect its request's path speaks:
// OpenAI chat and completions (and the engines that speak them: vLLM,
// llama.cpp, Ollama /v1, TGI, DeepSeek), OpenAI Responses, Anthropic
// messages, or the engines' own APIs (llama.cpp's /completion, Ollama's
// NDJSON). Each dialect's file keeps its lean reading (the token events,
// vouched for without building a document) beside its full one; the
// observer picks the dialect once, and handles what every dialect shares:
// [DONE], error events, bodies that are not JSON. Compatible engines
// differ in detail (see tests/fixtures/sse/README.md for the traps).
//
// It only observes: the relay has already forwarded the bytes.
#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

#include "http/dialect.hpp"
#include "stream/anthropic_dialect.hpp"
#include "stream/chat_dialect.hpp"
#include "stream/native_dialect.hpp"
#include "stream/observation.hpp"
#include "stream/responses_dialect.hpp"
#include "stream/sse_parser.hpp"

namespace tokengate::stream {

class stream_observer final : public sse_sink {
 public:
  // `record`: keep the generated content (tests, debugging). `fast_path`:
  // take each dialect's lean reading where it vouches for an event (off
  // only to compare the two readings in tests).
  explicit stream_observer(dialect d, bool record = false, bool fast_path = true);

  void on_event(const sse_event& event) override;
  // Ollama's native API streams one JSON object per line, not SSE.
  void feed_ndjson(std::string_view bytes);

  const stream_facts& facts() const { return observation_.facts(); }
  // The kinds of the most recent event.
  unsigned last_kinds() const { return observation_.kinds(); }
  // Events the lean reading answered for (the rest were read in full).
  std::size_t fast_path_events() const { return fast_path_events_; }
  void stop_recording() { observation_.stop_recording(); }

 private:
  void on_json(std::string_view event_type, std::string_view data);
  bool read_lean(std::string_view event_type, std::string_view data);
  void read_full(std::string_view event_type, std::string_view data);

  observation observation_;
  bool fast_path_;
  std::size_t fast_path_events_ = 0;
  std::variant<chat_reading, responses_reading, anthropic_reading, native_reading> reading_;
  std::string ndjson_line_;
};

}  // namespace tokengate::stream
