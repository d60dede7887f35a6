#pragma once
// Prefix affinity's key: a hash of a conversation's start, the part an
// engine's prefix cache holds between turns. For a chat it is the system
// prompt and the messages up to the first user message (Anthropic's
// `system` member too); for a completion or a Responses input given as a
// string, its first bytes. Every turn of a conversation resends that
// start unchanged, so every turn gets the same key.
#include <cstdint>
#include <optional>
#include <string_view>

#include "routing/json_scan.hpp"

namespace tokengate::fleet {

// At most `prefix_bytes` of the start are hashed. nullopt: the body has no
// conversation to speak of (an embeddings request, say).
std::optional<std::uint64_t> conversation_key(std::string_view body,
                                              const routing::scanned_object& scan,
                                              std::size_t prefix_bytes);

}  // namespace tokengate::fleet
