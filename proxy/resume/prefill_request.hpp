#pragma once
// resume: prefill. The request that continues a stream from what its
// client already has: the attempt's own body, with that text as a final
// assistant message for the model to go on from. Anthropic's API and
// llama.cpp continue a final assistant message as it is; an OpenAI-style
// chat request asks for it as vLLM and SGLang do (continue_final_message,
// add_generation_prompt: false). The output limits are lowered by the
// tokens already sent, so that the answer's length stays the client's.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "http/dialect.hpp"

namespace tokengate::resume {

// nullopt where the body cannot carry a prefill: not a JSON object with
// messages, a final message that is the assistant's already (the client's
// own prefill), or an API without assistant messages (Responses).
std::optional<std::string> prefill_body(std::string_view body, dialect target,
                                        std::string_view delivered, std::size_t delivered_tokens);

}  // namespace tokengate::resume
