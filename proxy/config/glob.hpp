#pragma once
#include <string_view>

namespace tokengate::config {

// `*` matches any run of characters, `?` one character; everything else is
// literal. (Route and key `models` entries, `prices` names.)
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace tokengate::config
