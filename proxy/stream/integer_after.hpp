#pragma once
// The whole number after a member's key (`"name":`) in JSON text, found by
// a search rather than a parse: for the few members read or rewritten in
// events that are otherwise passed on as they are (a resumed stream's
// sequence numbers and usage, the cached tokens of a usage event).
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tokengate::stream {

struct integer_at {
  std::size_t begin = 0, end = 0;  // where its digits lie in the text
  std::int64_t value = 0;
};

inline std::optional<integer_at> integer_after(std::string_view text, std::string_view key) {
  auto at = text.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  auto from = text.find_first_not_of(" \t\r\n", at + key.size());
  if (from == std::string_view::npos) return std::nullopt;
  integer_at n;
  auto [end, ec] = std::from_chars(text.data() + from, text.data() + text.size(), n.value);
  if (ec != std::errc()) return std::nullopt;
  n.begin = from;
  n.end = static_cast<std::size_t>(end - text.data());
  return n;
}

}  // namespace tokengate::stream
