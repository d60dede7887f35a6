#pragma once
// A whole file as bytes (fixtures).
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tokengate::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace tokengate::test
