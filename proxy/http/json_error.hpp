#pragma once
#include <string>
#include <string_view>

namespace tokengate {

// An OpenAI-style error body: {"error":{"message":..,"type":..,"code":..}}.
// Every error tokengate itself answers uses it, whatever the endpoint, since
// that is the shape every OpenAI-compatible SDK parses.
std::string json_error_body(std::string_view message, std::string_view type, std::string_view code);

// Anthropic's error body: {"type":"error","error":{"type":..,"message":..}},
// for refusals on /v1/messages that Anthropic's SDK maps to its own error
// types (rate_limit_error, overloaded_error, ...).
std::string anthropic_error_body(std::string_view message, std::string_view type);

}  // namespace tokengate
