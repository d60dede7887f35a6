#pragma once
// SHA-256 as 64 lower-case hex digits: the client keys' hashes
// (`keys[].sha256`) and the response cache's keys, one or two a request.
#include <string>
#include <string_view>

namespace tokengate {

std::string sha256_hex(std::string_view data);

}  // namespace tokengate
