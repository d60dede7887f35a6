#pragma once
#include <string>

#include "http/dialect.hpp"

namespace tokengate::stream {

// The events that end a stream the proxy cut because the upstream went past
// the output limit: what the engine itself would have sent on reaching it.
//   chat:        a finish chunk with finish_reason "length", then [DONE]
//   completions: the same in text_completion form
//   Anthropic:   message_delta (stop_reason "max_tokens") + message_stop
//   Responses:   response.incomplete (reason max_output_tokens)
std::string make_limit_final_events(dialect d, long long output_tokens);

}  // namespace tokengate::stream
