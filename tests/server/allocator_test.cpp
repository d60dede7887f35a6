// The heap the binary runs on, how long mimalloc keeps freed pages, and the
// trim after a burst on glibc's.
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

// mimalloc gives freed pages back a second after they were freed rather
// than its default 25 ms; an operator's own setting of mimalloc's
// environment variable stands.
TEST(Allocator, MimallocKeepsFreedPagesForTheTunedDelayUnlessTheOperatorSetsIt) {
  if (std::string(TOKENGATE_EXPECTED_HEAP) != "mimalloc") GTEST_SKIP() << "the binary runs on glibc's heap";
  auto tuned = output_of(std::string(TOKENGATE_BINARY) + " version");
  EXPECT_NE(tuned.find("freed pages kept " + std::to_string(freed_pages_kept_ms) + " ms"), std::string::npos)
      << tuned;
  auto operators = output_of("MIMALLOC_DECOMMIT_DELAY=40 " + std::string(TOKENGATE_BINARY) + " version");
  EXPECT_NE(operators.find("freed pages kept 40 ms"), std::string::npos) << operators;
}

TEST(Allocator, GlibcsHeapIsTrimmedAndNamed) {
  // The test binary itself does not link mimalloc.
  EXPECT_EQ(allocator_name(), "glibc malloc");
  EXPECT_TRUE(give_back_free_memory());
}

}  // namespace
}  // namespace tokengate
