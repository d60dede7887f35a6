#pragma once
// The SSE fixtures (tests/fixtures/sse/): which dialect each one is a
// stream of, by its name: the API path its engine answers on.
#include <filesystem>
#include <string>

#include "http/dialect.hpp"

namespace tokengate::test {

inline dialect fixture_dialect(const std::filesystem::path& fixture) {
  auto name = fixture.filename().string();
  if (name.starts_with("anthropic-")) return dialect::anthropic_messages;
  if (name.starts_with("openai-responses")) return dialect::openai_responses;
  if (name.starts_with("openai-completions")) return dialect::openai_completions;
  // llama.cpp's /completion and Ollama's /api/chat: their own APIs.
  if (name.starts_with("llamacpp-completion") || name.starts_with("ollama-chat-native"))
    return dialect::other;
  return dialect::openai_chat;  // OpenAI, vLLM, TGI, llama.cpp and Ollama on /v1, the SSE corner
                                // cases
}

}  // namespace tokengate::test
