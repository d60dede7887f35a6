#pragma once
// The prompt tokens an engine reports it found in its prefix cache, read
// from one event's usage (a stream's final usage chunk, Anthropic's
// message_start): OpenAI's, vLLM's and SGLang's
// prompt_tokens_details.cached_tokens, the Responses API's
// input_tokens_details.cached_tokens, Anthropic's cache_read_input_tokens.
// A search for the member, not a parse: it runs only on the usage events
// of the requests that ask (balance: fastest's routes).
#include <cstdint>
#include <optional>
#include <string_view>

#include "stream/integer_after.hpp"

namespace tokengate::stream {

inline std::optional<std::int64_t> cached_tokens_in(std::string_view data) {
  for (std::string_view key : {"\"cached_tokens\":", "\"cache_read_input_tokens\":"})
    if (auto n = integer_after(data, key); n && n->value >= 0) return n->value;
  return std::nullopt;
}

}  // namespace tokengate::stream
