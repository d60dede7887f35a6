#pragma once
// A hit's usage: the original's, with the whole prompt marked as read from
// the cache, in the client's dialect, so that a client (or its SDK's cost
// reckoning) sees a hit as what it is:
// - chat and legacy completions: usage.prompt_tokens_details.cached_tokens
//   = prompt_tokens;
// - the Responses API: usage.input_tokens_details.cached_tokens =
//   input_tokens;
// - Anthropic: its input_tokens counts the prompt read fresh only, so the
//   whole prompt (input, cache read and cache write tokens) moves to
//   cache_read_input_tokens, and input_tokens and
//   cache_creation_input_tokens are 0.
// The output tokens are the original's.
#include <string>
#include <string_view>

#include "http/dialect.hpp"

namespace tokengate::cache {

// `document` (a whole answer, or one event's data) with every usage in it
// marked so: its own `usage`, a message's (Anthropic's message_start) or a
// response's (the Responses API's response.completed). Empty when it has
// no usage to mark.
std::string with_cached_share(dialect d, std::string_view document);

}  // namespace tokengate::cache
