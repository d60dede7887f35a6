#pragma once
#include <string>
#include <string_view>

#include "http/dialect.hpp"

namespace tokengate::stream {

// The final SSE event sent when the upstream fails after the response has
// begun, in the shape each dialect's SDK recognises as an error (so a client
// never mistakes a cut stream for a complete answer):
//   OpenAI chat/completions: data: {"error":{...}}         (SDK raises on "error")
//   Responses:               event: error + {"type":"error",...}
//   Anthropic:               event: error + {"type":"error","error":{...}}
std::string make_error_event(dialect d, std::string_view type, std::string_view code,
                             std::string_view message);

}  // namespace tokengate::stream
