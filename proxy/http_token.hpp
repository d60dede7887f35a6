#pragma once
// RFC 9110 §5.6.2's token: what a field name, a Connection option or a
// transfer coding must be. One table for the upstream's head parser and
// for `tokengate bench --header`; and the case-blind compare of names.
#include <boost/beast/core/string.hpp>

#include <array>
#include <string_view>

namespace tokengate {

inline constexpr std::array<bool, 256> http_token_chars = [] {
  std::array<bool, 256> t{};
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  return t;
}();

inline bool is_http_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!http_token_chars[static_cast<unsigned char>(c)]) return false;
  return true;
}

// Two names (of fields, options or codings) alike but for case; the lengths
// first, as most names differ in length.
inline bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && boost::beast::iequals(a, b);
}

}  // namespace tokengate
