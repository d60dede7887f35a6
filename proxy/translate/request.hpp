#pragma once
// A request body in another API's terms: OpenAI chat completions ↔
// Anthropic messages, OpenAI Responses ↔ chat completions (Responses ↔
// messages chains two of them, translate/translation.cpp). The policy's edits (model name, output
// limit) are applied first, so the translation starts from the body the policy would have sent. A
// member with no counterpart is refused (400, naming it) unless the provider's own compatibility
// layer drops it too: then it is dropped (the lists are in docs/configuration.md, "Translation").
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "config/config.hpp"
#include "http/request_error.hpp"

namespace tokengate::translate {

struct request_options {
  // The route's output limit after the policy: Anthropic's API requires
  // max_tokens, and a chat client may not send one.
  std::optional<long long> output_limit;
  // How the OpenAI-style upstream spells the limit.
  config::limit_field limit_spelling = config::limit_field::keep;
  // The route's `prompt_cache: auto`: a Messages request gets cache
  // breakpoints where its prefix reaches this many tokens
  // (translate/prompt_cache.hpp). None: nothing is added.
  std::optional<long long> prompt_cache_min_tokens;
};

// The chat completions member an upstream takes the output limit in
// (`keep`: max_tokens, which every engine knows).
inline std::string_view chat_limit_key(config::limit_field spelling) {
  return spelling == config::limit_field::max_completion_tokens ? "max_completion_tokens"
                                                                : "max_tokens";
}

// When no limit is known at all (no max_tokens, no route limit).
inline constexpr long long fallback_max_tokens = 4096;

struct translated_request {
  std::string body;
  bool usage_asked = false;  // the chat client's stream_options.include_usage
};

std::variant<translated_request, request_error> anthropic_request_from_chat(
    std::string_view body, const request_options& options);
std::variant<translated_request, request_error> chat_request_from_anthropic(
    std::string_view body, const request_options& options);
// Stateless only: what needs a response stored at OpenAI
// (previous_response_id, conversation, background) or a tool that runs
// there (web search, file search, …) is refused, naming the member.
std::variant<translated_request, request_error> chat_request_from_responses(
    std::string_view body, const request_options& options);
// Stateless too: sent with `store: false`, the whole conversation as input.
std::variant<translated_request, request_error> responses_request_from_chat(
    std::string_view body, const request_options& options);

}  // namespace tokengate::translate
