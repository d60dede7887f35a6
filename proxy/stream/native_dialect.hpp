#pragma once
// The engines' own streaming APIs, for the paths that are not OpenAI's or
// Anthropic's: llama.cpp's /completion (events with `content` and `stop`)
// and Ollama's /api/chat and /api/generate (one JSON object per line, with
// `done`; stream_observer::feed_ndjson splits the lines). Rare enough that
// every event is read in full.
#include "stream/observation.hpp"

namespace tokengate::stream {

class native_reading {
 public:
  bool read_lean(std::string_view, observation&) { return false; }
  void read_full(const boost::json::value& event, observation& o);
};

}  // namespace tokengate::stream
