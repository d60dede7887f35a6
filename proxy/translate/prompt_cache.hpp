#pragma once
// `prompt_cache: auto` (config::prompt_cache_settings): Anthropic's cache
// breakpoints, placed in a Messages request translated from an OpenAI
// client's, who has no way to place them. Anthropic caches the prompt in
// the order tools, system, messages, and only up to a block that carries
// `cache_control`; at most 4 of them; a prefix shorter than the model's
// minimum is not cached. The places, and why (docs/configuration.md,
// "Prompt caching"):
//   - the last tool: the tools are the most stable part of an agent's
//     prompt, and stay cached when its system prompt changes;
//   - the end of the system prompt: stable for a whole conversation;
//   - the final user turn (the newest message of the user's, tool results
//     included): written now, read by the next request, which repeats the
//     whole conversation up to it;
//   - the user turn before it (where the last request put its final
//     breakpoint): read exactly even when more than 20 blocks (Anthropic's
//     look-back) have been added since, as an agent's tool loop adds them.
// Each only where the prompt up to it reaches `min_tokens`, estimated as
// the JSON bytes of the blocks up to it / 4 (the route's prompt-size
// estimate): an image's base64 counts high, and a breakpoint placed below
// Anthropic's minimum is ignored there, at no cost but its slot.
#include <boost/json/fwd.hpp>
#include <cstddef>

namespace tokengate::translate {

inline constexpr std::size_t max_cache_breakpoints = 4;

// Marks `request` (a Messages request, system as a string or blocks,
// message contents as blocks); returns how many breakpoints it placed.
std::size_t place_cache_breakpoints(boost::json::object& request, long long min_tokens);

}  // namespace tokengate::translate
