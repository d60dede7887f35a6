#include "fleet/prefix_key.hpp"

#include <algorithm>

namespace tokengate::fleet {
namespace {

constexpr std::uint64_t fnv_offset = 1469598103934665603ULL;

std::uint64_t fnv1a(std::uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// The end of the array element starting at `at` (the body was validated
// whole by the policy's scan, so counting brackets outside strings is enough).
std::size_t element_end(std::string_view text, std::size_t at, std::size_t end) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = at; i < end; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i;  // the array's own end
      --depth;
    } else if (c == ',' && depth == 0) {
      return i;
    }
  }
  return end;
}

// Whether a message object says "role": "user".
bool is_user_message(std::string_view element) {
  for (auto at = element.find("\"role\""); at != std::string_view::npos;
       at = element.find("\"role\"", at + 1)) {
    if (at > 0 && element[at - 1] == '\\') continue;  // inside a string
    auto rest = element.substr(at + 6);
    auto value = rest.find_first_not_of(" \t\r\n:");
    if (value != std::string_view::npos) return rest.substr(value).starts_with("\"user\"");
  }
  return false;
}

// The messages array's text up to the end of its first user message.
std::string_view first_turn(std::string_view body, const routing::json_member& messages) {
  std::size_t at = messages.begin + 1;  // past '['
  while (at < messages.end) {
    at = body.find_first_not_of(" \t\r\n,", at);
    if (at == std::string_view::npos || at >= messages.end || body[at] == ']') break;
    const auto end = element_end(body, at, messages.end);
    if (is_user_message(body.substr(at, end - at)))
      return body.substr(messages.begin, end - messages.begin);
    at = end;
  }
  return body.substr(messages.begin, messages.end - messages.begin);
}

}  // namespace

std::optional<std::uint64_t> conversation_key(std::string_view body,
                                              const routing::scanned_object& scan,
                                              std::size_t prefix_bytes) {
  std::string_view start;
  std::uint64_t h = fnv_offset;
  if (const auto* system = scan.find("system"))  // Anthropic's
    h = fnv1a(h, body.substr(system->begin, std::min(system->end - system->begin, prefix_bytes)));
  if (const auto* m = scan.find("messages"); m && m->type == routing::json_type::array)
    start = first_turn(body, *m);
  else if (const auto* in = scan.find("input"))
    start = in->type == routing::json_type::array ? first_turn(body, *in)
                                                  : body.substr(in->begin, in->end - in->begin);
  else if (const auto* p = scan.find("prompt"); p && p->type == routing::json_type::string)
    start = body.substr(p->begin, p->end - p->begin);
  if (start.empty()) return std::nullopt;
  return fnv1a(h, start.substr(0, prefix_bytes));
}

}  // namespace tokengate::fleet
