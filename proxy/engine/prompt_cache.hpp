#pragma once
// Anthropic's prompt caching, as the demo engine imitates it on
// /v1/messages. A request marks cache breakpoints with
// `cache_control: {type: ephemeral}` on tools, system blocks and message
// content blocks; the prompt is read in Anthropic's order (tools, system,
// messages), and the prefix up to each breakpoint is cached once it holds
// at least `min_tokens`. A later request whose prompt begins with a cached
// prefix (looked for at its breakpoints and the 20 block boundaries before
// each, as Anthropic does) reads it: cache_read_input_tokens; what its
// breakpoints add beyond that is written: cache_creation_input_tokens; the
// rest is input_tokens. More than 4 breakpoints is Anthropic's 400.
//
// The hash of a prefix leaves the cache_control markers out, and a string
// content reads as one text block: a conversation whose breakpoint moves
// to its newest message still reads what the last request wrote.
#include <boost/json/fwd.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <variant>

namespace tokengate::engine {

struct prompt_cache_usage {
  bool marked = false;      // the request had a breakpoint
  std::size_t total = 0;    // the prompt's tokens, tools included (bytes / 4 + 1)
  std::size_t read = 0;     // cache_read_input_tokens
  std::size_t written = 0;  // cache_creation_input_tokens
  std::size_t uncached() const { return total - read - written; }
};

class prompt_cache {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::size_t max_breakpoints = 4;
  static constexpr std::size_t lookback_blocks = 20;
  static constexpr std::size_t max_entries = 65536;

  prompt_cache(long long min_tokens, std::chrono::nanoseconds ttl)
      : min_tokens_(static_cast<std::size_t>(min_tokens)), ttl_(ttl) {}

  // One request's reads and writes (the cache learns its prefixes), or
  // the message of the 400 Anthropic answers a malformed marking with.
  std::variant<prompt_cache_usage, std::string> use(const boost::json::object& request,
                                                    clock::time_point now);

 private:
  bool live(std::uint64_t hash, clock::time_point now) const;
  void keep(std::uint64_t hash, clock::time_point now);

  std::size_t min_tokens_;
  std::chrono::nanoseconds ttl_;
  std::unordered_map<std::uint64_t, clock::time_point> expiry_;  // prefix hash → until
};

}  // namespace tokengate::engine
