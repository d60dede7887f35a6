#pragma once
#include <string_view>

namespace tokengate {

// The API a request speaks, decided by its path: it sets how its answer
// streams (which observer reads the events, how an error or a cut is
// written in the same dialect).
enum class dialect { openai_chat, openai_completions, openai_responses, anthropic_messages, other };

inline dialect dialect_for_path(std::string_view path) {
  if (path == "/v1/chat/completions") return dialect::openai_chat;
  if (path == "/v1/completions") return dialect::openai_completions;
  if (path == "/v1/responses") return dialect::openai_responses;
  if (path == "/v1/messages") return dialect::anthropic_messages;
  return dialect::other;
}

// The paths whose POSTs go upstream: the four APIs above, and embeddings.
inline bool is_proxied_post(std::string_view path) {
  return dialect_for_path(path) != dialect::other || path == "/v1/embeddings";
}

}  // namespace tokengate
