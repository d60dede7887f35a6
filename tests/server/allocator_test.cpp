// The heap the binary runs on, and the trim after a burst on glibc's.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "server/allocator.hpp"

namespace tokengate {
namespace {

std::string output_of(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return out;
  char chunk[256];
  while (auto n = std::fread(chunk, 1, sizeof chunk, pipe)) out.append(chunk, n);
  ::pclose(pipe);
  return out;
}

TEST(Allocator, TheBinaryRunsOnTheHeapItWasBuiltWith) {
  // TOKENGATE_EXPECTED_HEAP: "mimalloc" when CMake linked it, else glibc's.
  auto version = output_of(std::string(TOKENGATE_BINARY) + " version");
  EXPECT_NE(version.find(std::string("(heap: ") + TOKENGATE_EXPECTED_HEAP), std::string::npos) << version;
}

TEST(Allocator, GlibcsHeapIsTrimmedAndNamed) {
  // The test binary itself does not link mimalloc.
  EXPECT_EQ(allocator_name(), "glibc malloc");
  EXPECT_TRUE(give_back_free_memory());
}

}  // namespace
}  // namespace tokengate
