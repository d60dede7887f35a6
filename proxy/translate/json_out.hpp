#pragma once
// Writing the client's events straight into the output string: a
// translated event is a few members around the text it carries, and
// building a document to serialise it would allocate per event.
#include <cstdint>
#include <string>
#include <string_view>

#include "scan/hex.hpp"

namespace tokengate::translate {

// `text` as a JSON string, quotes included. (The text came out of a JSON
// parser, so it is valid UTF-8; only what JSON requires is escaped.)
inline void append_json_string(std::string& out, std::string_view text) {
  out.push_back('"');
  std::size_t run = 0;  // start of the bytes not yet copied
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.substr(run, i - run));
    run = i + 1;
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        out.append("\\u00");
        out.push_back(hex_digits[c >> 4]);
        out.push_back(hex_digits[c & 15]);
    }
  }
  out.append(text.substr(run));
  out.push_back('"');
}

inline void append_int(std::string& out, std::int64_t n) { out.append(std::to_string(n)); }

// An SSE event: `data: …` alone (OpenAI), or with its `event:` line (Anthropic).
inline void begin_data(std::string& out) { out.append("data: "); }
inline void begin_event(std::string& out, std::string_view type) {
  out.append("event: ").append(type).append("\ndata: ");
}
inline void end_event(std::string& out) { out.append("\n\n"); }

}  // namespace tokengate::translate
