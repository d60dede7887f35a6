#pragma once
// A broken promise in a fuzz target: name it, then crash so libFuzzer keeps
// the input.
#include <cstdio>
#include <cstdlib>

#define check(ok)                                                                  \
  do {                                                                             \
    if (!(ok)) {                                                                   \
      std::fprintf(stderr, "check failed: %s (%s:%d)\n", #ok, __FILE__, __LINE__); \
      std::abort();                                                                \
    }                                                                              \
  } while (0)
