#pragma once
// `tokengate probe URL`: one plain-HTTP GET with a deadline; exit 0 on a 2xx.
// It is the container's HEALTHCHECK, so the runtime image needs no curl.
#include <chrono>
#include <string>

namespace tokengate::cli {

int probe(const std::string& url, std::chrono::milliseconds timeout);

}  // namespace tokengate::cli
