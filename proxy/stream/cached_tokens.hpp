#pragma once
// The prompt tokens an engine reports it found in its prefix cache, read
// from one event's usage (a stream's final usage chunk, Anthropic's
// message_start): OpenAI's, vLLM's and SGLang's
// prompt_tokens_details.cached_tokens, the Responses API's
// input_tokens_details.cached_tokens, Anthropic's cache_read_input_tokens.
// A search for the member, not a parse: it runs only on the usage events
// of the requests that ask (balance: fastest's routes).
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tokengate::stream {

inline std::optional<std::int64_t> cached_tokens_in(std::string_view data) {
  for (std::string_view key : {"\"cached_tokens\":", "\"cache_read_input_tokens\":"}) {
    auto at = data.find(key);
    if (at == std::string_view::npos) continue;
    auto from = data.find_first_not_of(" \t\r\n", at + key.size());
    if (from == std::string_view::npos) return std::nullopt;
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(data.data() + from, data.data() + data.size(), n);
    if (ec == std::errc() && n >= 0) return n;
  }
  return std::nullopt;
}

}  // namespace tokengate::stream
