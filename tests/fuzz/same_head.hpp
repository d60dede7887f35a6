#pragma once
// What the two head fuzz targets check alike: our parsed head against
// Beast's parser's, on the same bytes, where both accepted them.
#include <algorithm>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/parser.hpp>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"
#include "http/message_head.hpp"

namespace tokengate::fuzz {

inline std::string lower(std::string_view name) {
  std::string s(name);
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The framing, the connection's fate and the fields. Beast keeps fields of
// one name together (a repeat goes after the last of its name); we keep
// the wire's order. So they are compared name by name, each name's values
// in order; the values only where no fold was blanked (`folded`: Beast
// joins a fold with one space, we blank its CRLF).
template <bool isRequest, typename Head>
void check_same_head(const Head& head, const http::basic_parser<isRequest>& parser,
                     const http::fields& fields, bool folded) {
  const auto beast_length = parser.content_length();
  check(head.content_length ==
        (beast_length ? std::optional<std::uint64_t>(*beast_length) : std::nullopt));
  check(head.chunked == parser.chunked());
  check(head.keep_alive() == parser.keep_alive());
  check(head.has_body() == !parser.is_done());

  using named = std::pair<std::string, std::string_view>;
  auto by_name = [](std::vector<named> list) {
    std::stable_sort(list.begin(), list.end(),
                     [](const named& a, const named& b) { return a.first < b.first; });
    return list;
  };
  std::vector<named> mine, theirs;
  for (const auto& f : head.fields) {
    mine.emplace_back(lower(f.name), f.value);
    // A forwarded line is the field, whole, ending with its CRLF.
    check(f.line.starts_with(f.name) && f.line.ends_with("\r\n"));
  }
  for (const auto& f : fields)
    theirs.emplace_back(lower(std::string_view(f.name_string())), std::string_view(f.value()));
  mine = by_name(std::move(mine));
  theirs = by_name(std::move(theirs));
  check(mine.size() == theirs.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    check(mine[i].first == theirs[i].first);
    if (!folded) check(mine[i].second == theirs[i].second);
  }
}

}  // namespace tokengate::fuzz
