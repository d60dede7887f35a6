#include "server/allocator.hpp"

#include <dlfcn.h>

#include <cstdlib>
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace tokengate {
namespace {

// mimalloc's version (209 for 2.0.9) when malloc is mimalloc's: a block
// from malloc lies in mimalloc's heap. (Loaded is not enough: another
// library ahead of it in the lookup order would keep malloc.) Looked up
// rather than called, so that the library and its tests build without it.
int mimalloc_version() {
  using version_function = int (*)();
  using in_heap_function = bool (*)(const void*);
  static const int version = [] {
    auto* version_of = reinterpret_cast<version_function>(::dlsym(RTLD_DEFAULT, "mi_version"));
    auto* in_heap = reinterpret_cast<in_heap_function>(::dlsym(RTLD_DEFAULT, "mi_is_in_heap_region"));
    if (!version_of || !in_heap) return 0;
    void* probe = std::malloc(64);
    bool its_block = in_heap(probe);
    std::free(probe);
    return its_block ? version_of() : 0;
  }();
  return version;
}

}  // namespace

std::string allocator_name() {
  if (int v = mimalloc_version())
    return "mimalloc " + std::to_string(v / 100) + '.' + std::to_string(v / 10 % 10) + '.' + std::to_string(v % 10);
#ifdef __GLIBC__
  return "glibc malloc";
#else
  return "the C library's malloc";
#endif
}

bool give_back_free_memory() {
  if (mimalloc_version()) return false;
#ifdef __GLIBC__
  malloc_trim(0);
  return true;
#else
  return false;
#endif
}

}  // namespace tokengate
