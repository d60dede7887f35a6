#pragma once
// The demo engine's "model": a fixed text, one word per token, so that a test
// can predict every byte of an answer.
#include <boost/json/fwd.hpp>
#include <string>
#include <string_view>

namespace tokengate::engine {

// Token i of every answer ("The", " quick", " brown", ...).
std::string_view demo_token(std::size_t i);

// The bytes of text in a prompt's piece: a string, or the `text` and
// `content` members of its objects and arrays, however deep.
std::size_t text_bytes(const boost::json::value& v);

// Roughly 4 bytes of text per token, as for English with common tokenizers:
// the prompt length the simulated prefill time is based on.
std::size_t estimate_prompt_tokens(const boost::json::object& request);

}  // namespace tokengate::engine
