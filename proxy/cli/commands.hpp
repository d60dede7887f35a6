#pragma once
#include <string>
#include <vector>

namespace tokengate::cli {

// `tokengate <command> [options]`; returns the process exit code.
int run(const std::vector<std::string>& args);

}  // namespace tokengate::cli
