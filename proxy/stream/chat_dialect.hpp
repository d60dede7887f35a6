#pragma once
// OpenAI's chat and completions streams, and every engine that speaks them
// (vLLM, llama.cpp, Ollama /v1, TGI, SGLang, DeepSeek): chat_reading reads
// each event the lean way (chat_chunk_reader, below) when it can vouch
// for it, else in full from the parsed document; the two give the same
// facts (tests/stream/chat_dialect_test.cpp, tests/fuzz/sse_fuzz).
//
// The lean reader: a fast reader for the one event shape that carries almost every token in
// practice: an OpenAI-style chat or completions chunk,
//   {"id":…,"object":"chat.completion.chunk",…,"choices":[{"index":0,
//    "delta":{"content":"…"},"finish_reason":null}]}
// Building a Boost.JSON document for each such event cost about 9 % of the
// relay's CPU (perf, 64 fast streams). This reader validates the event in
// one pass without building anything and pulls out only what the observer
// counts.
//
// It answers "here is exactly what a full parse would find" or "not sure":
// anything unusual (a `type` or `error` member, escapes in keys,
// exponents, duplicate keys, deep nesting, lone surrogates, invalid UTF-8)
// returns false, and the observer parses the event the slow way. The fuzz
// target tests/fuzz/sse_fuzz checks that both ways agree on every input.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "stream/observation.hpp"

namespace tokengate::stream {

struct chat_chunk {
  struct choice {
    std::int64_t index = 0;
    bool text = false;       // delta.content or text, non-empty
    bool reasoning = false;  // delta.reasoning_content or delta.reasoning, non-empty
    bool tool_call = false;  // a delta.tool_calls[].function with a non-empty name or arguments
    std::string_view finish_reason;  // raw bytes: only taken when free of escapes
  };
  static constexpr std::size_t max_choices = 8;
  choice choices[max_choices];
  std::size_t choice_count = 0;
  bool usage = false;  // a `usage` object was present
  std::optional<std::int64_t> prompt_tokens, completion_tokens;

  // Empty again, without touching the choices beyond choice_count (each is
  // reset as it is added): clearing all eight cost as much per event as
  // reading a remembered chunk (callgrind).
  void reset() {
    choice_count = 0;
    usage = false;
    prompt_tokens.reset();
    completion_tokens.reset();
  }
  choice& add_choice() { return choices[choice_count++] = choice{}; }
};

// True when `data` is certainly a chat/completions chunk and `out` holds
// what it says; false means "parse it the general way".
bool read_chat_chunk(std::string_view data, chat_chunk& out);

// Which of a choice's flags a chunk's one variable string decides.
enum class string_role : unsigned char { text, reasoning, arguments };

// read_chat_chunk for the events of one stream, which repeat themselves:
// within a stream every byte of a token chunk but its content string is
// usually the same (id, created, model, the closing finish_reason: null).
// It remembers the bytes around the content string of the last chunk read
// in full (one choice, its text decided by that one string, no finish
// reason); a chunk that repeats them exactly, with a valid string between,
// reads exactly as that one did, but for whether the string is empty: the
// reader is deterministic and looks at a content string for nothing else.
// So only that string is checked, a tenth of the work of a full read. A
// tool call's arguments string is remembered the same way, when it is the
// chunk's only sign of a tool call (no name beside it): agents' streams
// are mostly such fragments of arguments. So is a reasoning model's
// thinking (delta.reasoning_content, DeepSeek's and llama.cpp's spelling,
// or delta.reasoning, vLLM's and OpenRouter's), which is most of its
// tokens: without it each was read in full, as every chunk of a stream is
// while no chunk has been remembered.
// OpenAI's chunks end with an `obfuscation` string of random length since
// 2025: the chunk's last member, when a string or a plain integer, is a
// second hole, checked only for being a valid one (without it no two
// chunks of an OpenAI stream matched, and each was read in full: 653,700
// instructions a 256-token request against 296,642 without the member,
// instructions.sh; a varying integer there, as the demo engine's stamp
// for the benchmark's transit, cost the same: 675,780 against 304,254).
class chat_chunk_reader {
 public:
  bool read(std::string_view data, chat_chunk& out);
  // Reads answered from memory (for tests).
  std::size_t remembered_reads() const { return remembered_reads_; }
  // Reads in full, accepted, that began after the remembered members (for
  // tests).
  std::size_t resumed_reads() const { return resumed_reads_; }

 private:
  // Where the content string of a chunk shaped as remembered ends; null
  // when the chunk is not shaped so. Sets the usage counts that are holes.
  const char* remembered_content_end(std::string_view data,
                                     std::optional<std::int64_t>& prompt_tokens,
                                     std::optional<std::int64_t>& completion_tokens) const;
  void remember_tail_holes();

  std::string frame_;       // the bytes before the content string, then those after it
  std::size_t before_ = 0;  // where the bytes after it start in frame_
  // Values of the remembered chunk's last members that change from chunk
  // to chunk, left out of frame_ too: OpenAI's padding string (every
  // chunk ends with "obfuscation": a string of random length), a stamp or
  // a counter, or each count of a usage object sent with every chunk
  // (vLLM's and SGLang's continuous_usage_stats). Where each stood in the
  // bytes after the content, in order, and which are strings (bit i; the
  // others are plain integers).
  static constexpr std::size_t max_tail_holes = 6;
  std::uint16_t tail_holes_[max_tail_holes] = {};
  std::uint8_t tail_hole_count_ = 0;
  std::uint8_t string_holes_ = 0;
  // The holes that are usage.prompt_tokens and usage.completion_tokens
  // (max_tail_holes: none).
  std::uint8_t prompt_hole_ = max_tail_holes, completion_hole_ = max_tail_holes;
  // How many of frame_'s first bytes a chunk read in full may start with
  // and be read from after them (reader::resumable_prefix); 0: none.
  std::size_t resumable_prefix_ = 0;
  // What the remembered chunk said (frame_ empty: none): its one choice and
  // its usage, not a whole chat_chunk (eight choices), as it is kept for
  // every open stream.
  chat_chunk::choice remembered_choice_;
  bool remembered_usage_ = false;
  std::optional<std::int64_t> remembered_prompt_tokens_, remembered_completion_tokens_;
  string_role remembered_role_ = string_role::text;  // which flag the string between decides
  std::size_t remembered_reads_ = 0;
  std::size_t resumed_reads_ = 0;
};

// What the lean reader found in the event at hand, reused by every event on
// this thread: built afresh for each event, its eight choices cost as much
// as the reading.
inline thread_local chat_chunk chunk_scratch;

// The chat dialect's reading of one event (not [DONE], not an error).
class chat_reading {
 public:
  // True when the lean reader vouched for the event and `o` holds what it
  // carried; false means "read it in full".
  // (Inline: it runs for nearly every event of a stream.)
  [[gnu::always_inline]] bool read_lean(std::string_view data, observation& o) {
    chat_chunk& chunk = chunk_scratch;
    if (!chunks_.read(data, chunk)) return false;
    for (std::size_t i = 0; i < chunk.choice_count; ++i) {
      const auto& c = chunk.choices[i];
      o.add_kinds((c.text ? kind_text : 0u) | (c.reasoning ? kind_reasoning : 0u) |
                  (c.tool_call ? kind_tool_call : 0u));
      o.finish(c.index, c.finish_reason);
    }
    if (chunk.usage) o.usage(chunk.prompt_tokens, chunk.completion_tokens);
    return true;
  }
  // The parsed event, an object: its choices' deltas (or completions'
  // text), finish reasons and usage.
  void read_full(const boost::json::value& event, observation& o);

  const chat_chunk_reader& lean_reader() const { return chunks_; }

 private:
  chat_chunk_reader chunks_;  // remembers this stream's chunk shape
};

}  // namespace tokengate::stream
