// The heap the binary runs on, how long mimalloc keeps freed pages, and the
// trim after a burst on glibc's.
#include "server/allocator.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

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
  EXPECT_NE(version.find(std::string("(heap: ") + TOKENGATE_EXPECTED_HEAP), std::string::npos)
      << version;
}

// mimalloc gives freed pages back a second after they were freed rather
// than its default 25 ms; an operator's own setting of mimalloc's
// environment variable stands.
TEST(Allocator, MimallocKeepsFreedPagesForTheTunedDelayUnlessTheOperatorSetsIt) {
  if (std::string(TOKENGATE_EXPECTED_HEAP) != "mimalloc")
    GTEST_SKIP() << "the binary runs on glibc's heap";
  auto tuned = output_of(std::string(TOKENGATE_BINARY) + " version");
  EXPECT_NE(tuned.find("freed pages kept " + std::to_string(freed_pages_kept_ms) + " ms"),
            std::string::npos)
      << tuned;
  auto operators =
      output_of("MIMALLOC_DECOMMIT_DELAY=40 " + std::string(TOKENGATE_BINARY) + " version");
  EXPECT_NE(operators.find("freed pages kept 40 ms"), std::string::npos) << operators;
}

TEST(Allocator, GlibcsHeapIsTrimmedAndNamed) {
  // The test binary itself does not link mimalloc.
  EXPECT_EQ(allocator_name(), "glibc malloc");
  EXPECT_TRUE(give_back_free_memory());
}

// memory.after_burst: keep. On mimalloc the real binary says so (the same
// switch as mimalloc's own MIMALLOC_ALLOW_DECOMMIT=0, which an operator may
// set instead); tests/cli/memory_after_burst.sh checks what it holds.
TEST(Allocator, MimallocSaysWhenFreedPagesAreKeptUntilExit) {
  if (std::string(TOKENGATE_EXPECTED_HEAP) != "mimalloc")
    GTEST_SKIP() << "the binary runs on glibc's heap";
  auto kept = output_of("MIMALLOC_ALLOW_DECOMMIT=0 " + std::string(TOKENGATE_BINARY) + " version");
  EXPECT_NE(kept.find("freed pages kept until exit"), std::string::npos) << kept;
}

// memory.after_burst: lazy_free. On mimalloc 2.0 it is page_reset on
// where decommits are off (MIMALLOC_PAGE_RESET=1 MIMALLOC_ALLOW_DECOMMIT=0
// from the environment do the same); page_reset alone still decommits
// after the delay, and is named so. tests/cli/memory_after_burst.sh checks
// the config's way and what the kernel does with the pages.
TEST(Allocator, MimallocSaysWhenFreedPagesAreGivenBackLazily) {
  if (std::string(TOKENGATE_EXPECTED_HEAP) != "mimalloc")
    GTEST_SKIP() << "the binary runs on glibc's heap";
  auto lazy = output_of("MIMALLOC_PAGE_RESET=1 MIMALLOC_ALLOW_DECOMMIT=0 " +
                        std::string(TOKENGATE_BINARY) + " version");
  EXPECT_NE(lazy.find("freed pages given back lazily (MADV_FREE)"), std::string::npos) << lazy;
  auto reset_only =
      output_of("MIMALLOC_PAGE_RESET=1 " + std::string(TOKENGATE_BINARY) + " version");
  EXPECT_NE(reset_only.find("freed pages kept " + std::to_string(freed_pages_kept_ms) + " ms)"),
            std::string::npos)
      << reset_only;
}

// The last two in this file change the process's allocator settings for
// good (ctest runs each test in a process of its own).

// glibc's heap cannot give pages back lazily: it trims as with give_back,
// and says so.
TEST(Allocator, GlibcsHeapAskedToFreeLazilySaysItCannot) {
  free_memory_lazily();
  EXPECT_EQ(allocator_name(), "glibc malloc, trimmed after bursts (lazy freeing needs mimalloc)");
  EXPECT_TRUE(give_back_free_memory());
}

TEST(Allocator, GlibcsHeapKeptAfterBurstsIsNotTrimmed) {
  keep_freed_memory();
  EXPECT_EQ(allocator_name(), "glibc malloc, not trimmed after bursts");
  EXPECT_FALSE(give_back_free_memory());
}

}  // namespace
}  // namespace tokengate
