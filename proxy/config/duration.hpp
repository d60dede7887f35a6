#pragma once
#include <chrono>
#include <optional>
#include <string_view>

namespace tokengate::config {

using duration = std::chrono::milliseconds;

// Parses "250ms", "5s", "2m", "1h" or a bare number of seconds ("30").
std::optional<duration> parse_duration(std::string_view text);

}  // namespace tokengate::config
