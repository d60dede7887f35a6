#pragma once
// The usage of a whole answer (one that was not streamed), found in its
// bytes as they pass to the client: the top-level `usage` member of the
// JSON body, whatever the API (chat and completions' prompt_tokens /
// completion_tokens; Anthropic's and the Responses API's input_tokens /
// output_tokens).
//
// Why not parse the body: the relay does not hold it (it goes to the
// client read by read), and a whole answer may be megabytes of content.
// The finder keeps three facts across reads (the nesting depth, whether it
// is inside a string, an escape owed) and looks for the next quote or
// bracket with memchr-speed skips; only the `usage` object itself, a few
// hundred bytes, is copied and parsed. Once found, the rest of the body is
// not looked at.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokengate::stream {

class whole_usage {
 public:
  // The body's next bytes, in order, its framing already undone.
  void feed(std::string_view bytes);
  // What the usage says, once the body is whole (nullopt: not found, or
  // not an object of counts).
  std::optional<std::int64_t> input_tokens() const { return input_; }
  std::optional<std::int64_t> output_tokens() const { return output_; }
  // The prompt tokens the engine found in its cache: OpenAI's, vLLM's and
  // SGLang's prompt_tokens_details.cached_tokens, the Responses API's
  // input_tokens_details.cached_tokens, Anthropic's cache_read_input_tokens.
  std::optional<std::int64_t> cached_tokens() const { return cached_; }
  // Anthropic's cache_creation_input_tokens. (Anthropic's input_tokens
  // leaves its cache reads and writes out; input_tokens() adds them, so
  // that it counts the whole prompt in every API.)
  std::optional<std::int64_t> cache_write_tokens() const { return cache_written_; }
  bool found() const { return state_ == state::done && (input_ || output_); }

  // The most of a `usage` value kept: real ones are a few hundred bytes.
  static constexpr std::size_t max_usage_bytes = 8192;

 private:
  enum class state { scanning, after_key, capturing, done };

  const char* skip_string(const char* p, const char* end);
  const char* structural(const char* p, const char* end);
  void read_captured();

  state state_ = state::scanning;
  int depth_ = 0;  // objects and arrays open
  bool in_string_ = false;
  bool escape_owed_ = false;  // the last byte in a string was an unpaired backslash
  std::optional<std::int64_t> cached_, cache_written_;
  // A top-level member's name, as far as it can still be "usage".
  std::string key_;
  bool key_may_match_ = false;
  std::string captured_;  // the usage value's bytes
  std::optional<std::int64_t> input_, output_;
};

}  // namespace tokengate::stream
