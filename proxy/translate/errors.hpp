#pragma once
// Errors from one API in the other's words: the whole error answer (its
// status and body) and the error event of a stream. The SDKs pick their
// exception by status, so the statuses that differ are mapped: Anthropic's
// 529 (overloaded_error) is OpenAI's 503, and back.
#include <string>
#include <string_view>

namespace tokengate::translate {

// The Anthropic error type its API gives for an HTTP status.
std::string_view anthropic_type_for_status(unsigned status);

// An Anthropic error answer (upstream) as OpenAI's: status and body replaced.
void anthropic_error_to_openai(unsigned& status, std::string& body);
// An OpenAI-style error answer (upstream) as Anthropic's.
void openai_error_to_anthropic(unsigned& status, std::string& body);

// An error event's detail ({"type", "message"} of Anthropic's, {"message",
// "type", "code"} of OpenAI's) as the other dialect's whole event
// (stream/error_event.hpp writes it).
std::string openai_error_event(std::string_view anthropic_type, std::string_view message);
std::string anthropic_error_event(std::string_view openai_type, std::string_view openai_code,
                                  std::string_view message);

}  // namespace tokengate::translate
