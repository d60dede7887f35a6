#pragma once
// Which heap allocator the process runs on, and giving its free memory back.
//
// The release binary links mimalloc (CMake option TOKENGATE_MIMALLOC), which
// replaces malloc for the whole process; the tests and the sanitizer builds
// run on glibc's. Opening and closing thousands of streams at once is where
// the difference shows: glibc's allocator walked and merged its free lists
// there (28 % of the proxy's user-space cycles, perf, 2,000 streams of short
// requests) and an event behind that work waited; see docs/performance.md,
// "Optimisation 10".
#include <string>

namespace tokengate {

// "mimalloc 2.0.9" or "glibc malloc", for the version line and the log.
std::string allocator_name();

// Gives memory that a burst freed back to the system, where the allocator
// keeps it otherwise (glibc: malloc_trim). mimalloc returns freed pages on
// its own a moment after they are freed, so there it does nothing. True
// when it trimmed.
bool give_back_free_memory();

}  // namespace tokengate
