#include "server/allocator.hpp"

#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
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
    auto* in_heap =
        reinterpret_cast<in_heap_function>(::dlsym(RTLD_DEFAULT, "mi_is_in_heap_region"));
    if (!version_of || !in_heap) return 0;
    void* probe = std::malloc(64);
    bool its_block = in_heap(probe);
    std::free(probe);
    return its_block ? version_of() : 0;
  }();
  return version;
}

// mimalloc's functions, looked up like its version (nullptr without it).
template <typename Function>
Function* mimalloc_function(const char* name) {
  return mimalloc_version() ? reinterpret_cast<Function*>(::dlsym(RTLD_DEFAULT, name)) : nullptr;
}

// mimalloc 2's mi_option_get / mi_option_set (nullptr elsewhere: another
// major version may number its options otherwise).
template <typename Function>
Function* mimalloc_option_function(const char* name) {
  return mimalloc_version() / 100 == 2 ? mimalloc_function<Function>(name) : nullptr;
}

// mimalloc 2's option index of the delay before freed pages go back to the
// system (mi_option_decommit_delay in 2.0, mi_option_purge_delay in 2.1:
// the same index, and the same environment variable's default).
constexpr int mimalloc_decommit_delay_option = 15;

// mimalloc 2.0's switch for giving freed pages back at all
// (mi_option_allow_decommit, MIMALLOC_ALLOW_DECOMMIT); 2.1 has none and
// takes a delay of -1 for never.
constexpr int mimalloc_allow_decommit_option = 22;
constexpr int first_mimalloc_without_that_switch = 210;

// How freed pages are given back when they are: mimalloc 2.0 resets (marks
// free with MADV_FREE, left mapped) every page it frees whole when its
// page_reset option is on; 2.1 resets instead of decommitting
// (MADV_DONTNEED) when its purge_decommits option is off.
constexpr int mimalloc_page_reset_option = 11;
constexpr int mimalloc_purge_decommits_option = 5;

bool mimalloc_keeps_freed_pages(long (*get_option)(int)) {
  if (mimalloc_version() < first_mimalloc_without_that_switch)
    return get_option(mimalloc_allow_decommit_option) == 0;
  return get_option(mimalloc_decommit_delay_option) < 0;
}

bool mimalloc_resets_freed_pages(long (*get_option)(int)) {
  if (mimalloc_version() < first_mimalloc_without_that_switch)
    return get_option(mimalloc_page_reset_option) != 0;
  return get_option(mimalloc_purge_decommits_option) == 0;
}

// mimalloc 2.0 does not give a thread's freed pages back as it frees them,
// nor at mi_collect: it marks them in their segment (32 MiB), and gives
// back all that a segment has marked when the segment next takes a fresh
// page once the delay is over, or frees one after it; each free before
// then extends the delay by a millisecond. A process idle after a burst
// may do neither, and then kept the burst's memory: the whole of it once
// in ten bursts of 2,000 streams here (the collect came a few milliseconds
// before the delay that the last frees had set ran out; traced in a build
// of mimalloc 2.0.9). So for 2.0, after the collect, fresh pages are taken
// with the delay at 0 and freed again: each gives back what its segment
// marked before, at once where it reuses marked memory (the delay starts
// again, at 0), otherwise once the segment's delay is over, which is why
// the server repeats this at the checks after a collect. The blocks are
// large (a page each, from the free spans of 2 MiB or more that a burst
// leaves) and held until all are taken, so that they come from several
// segments. Written against 2.0.9, the version Debian 12 ships; 2.1
// purges otherwise and gets the plain collect.
void take_fresh_pages_giving_marked_ones_back() {
  auto* get_option = mimalloc_option_function<long(int)>("mi_option_get");
  auto* set_option = mimalloc_option_function<void(int, long)>("mi_option_set");
  auto* allocate = mimalloc_function<void*(std::size_t)>("mi_malloc");
  auto* release = mimalloc_function<void(void*)>("mi_free");
  if (mimalloc_version() >= first_mimalloc_without_that_switch || !get_option || !set_option ||
      !allocate || !release)
    return;
  if (mimalloc_keeps_freed_pages(get_option))
    return;  // (lazy_free: nothing is marked, pages are reset as freed)
  // The option is the process's: one thread at a time sets it to 0 and back
  // to the delay read before any did.
  static std::mutex one_at_a_time;
  static const long delay = get_option(mimalloc_decommit_delay_option);
  std::lock_guard lock(one_at_a_time);
  set_option(mimalloc_decommit_delay_option, 0);
  auto take_together_then_free = [&](auto& blocks, std::size_t size) {
    for (auto& block : blocks) block = allocate(size);
    for (void* block : blocks) release(block);
  };
  std::array<void*, 8> blocks{};
  take_together_then_free(blocks, std::size_t{2} << 20);
  // A segment the burst left fragmented has no free span of 2 MiB, and the
  // blocks above never land in it: traced, a long-lived process kept 30 MB
  // marked in such a segment while every block went to the two segments
  // beside it, check after check. Blocks of three slices (192 KiB, the
  // smallest that gets a page of its own) fit the spans such a segment has
  // free; taken together, each from the first free span that fits, they
  // reach the segments those spans are in.
  std::array<void*, 64> small_blocks{};
  take_together_then_free(small_blocks, std::size_t{192} << 10);
  set_option(mimalloc_decommit_delay_option, delay);
}

bool trim_after_bursts = true;
bool lazy_freeing_asked = false;

}  // namespace

std::string allocator_name() {
  if (int v = mimalloc_version()) {
    auto name = "mimalloc " + std::to_string(v / 100) + '.' + std::to_string(v / 10 % 10) + '.' +
                std::to_string(v % 10);
    auto* get_option = mimalloc_option_function<long(int)>("mi_option_get");
    if (!get_option) return name;
    bool reset = mimalloc_resets_freed_pages(get_option);
    bool until_exit = mimalloc_keeps_freed_pages(get_option);
    if (mimalloc_version() < first_mimalloc_without_that_switch) {
      // (2.0 resets a page as it frees it whole; where it may also decommit
      // pages, it still does so after the delay.)
      if (until_exit)
        return name + (reset ? ", freed pages given back lazily (MADV_FREE)"
                             : ", freed pages kept until exit");
      reset = false;
    } else if (until_exit) {
      return name + ", freed pages kept until exit";
    }
    name +=
        ", freed pages kept " + std::to_string(get_option(mimalloc_decommit_delay_option)) + " ms";
    return reset ? name + ", then given back lazily (MADV_FREE)" : name;
  }
#ifdef __GLIBC__
  if (!trim_after_bursts) return "glibc malloc, not trimmed after bursts";
  // (glibc's heap has no lazy freeing: it gives memory back as usual.)
  return lazy_freeing_asked ? "glibc malloc, trimmed after bursts (lazy freeing needs mimalloc)"
                            : "glibc malloc";
#else
  return "the C library's malloc";
#endif
}

void tune_allocator() {
  // An operator's own setting (mimalloc reads its environment) stands.
  for (const char* name : {"MIMALLOC_DECOMMIT_DELAY", "MIMALLOC_PURGE_DELAY"})
    if (std::getenv(name)) return;
  if (auto* set_option = mimalloc_option_function<void(int, long)>("mi_option_set"))
    set_option(mimalloc_decommit_delay_option, freed_pages_kept_ms);
}

void keep_freed_memory() {
  trim_after_bursts = false;
  auto* set_option = mimalloc_option_function<void(int, long)>("mi_option_set");
  if (!set_option) return;
  if (mimalloc_version() < first_mimalloc_without_that_switch)
    set_option(mimalloc_allow_decommit_option, 0);
  else
    set_option(mimalloc_decommit_delay_option, -1);
}

void free_memory_lazily() {
  lazy_freeing_asked = true;
  auto* set_option = mimalloc_option_function<void(int, long)>("mi_option_set");
  if (!set_option) return;
  if (mimalloc_version() < first_mimalloc_without_that_switch) {
    set_option(mimalloc_allow_decommit_option, 0);
    set_option(mimalloc_page_reset_option, 1);
  } else {
    set_option(mimalloc_purge_decommits_option, 0);
  }
}

bool heap_gives_back_per_thread() { return mimalloc_version() != 0; }

bool give_back_free_memory() {
  if (!trim_after_bursts) return false;
  if (auto* collect = mimalloc_function<void(bool)>("mi_collect")) {
    collect(true);  // (this thread's heap, and the segments freed to the process's cache)
    take_fresh_pages_giving_marked_ones_back();
    return true;
  }
#ifdef __GLIBC__
  malloc_trim(0);
  return true;
#else
  return false;
#endif
}

}  // namespace tokengate
