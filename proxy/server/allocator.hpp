#pragma once
// Which heap allocator the process runs on, and giving its free memory back.
//
// The release binary links mimalloc (CMake option TOKENGATE_MIMALLOC), which
// replaces malloc for the whole process; the tests and the sanitizer builds
// run on glibc's. Opening and closing thousands of streams at once is where
// the difference shows: glibc's allocator walked and merged its free lists
// there (28 % of the proxy's user-space cycles, perf, 2,000 streams of short
// requests) and an event behind that work waited; see docs/performance.md,
// "The heap".
#include <string>

namespace tokengate {

// "mimalloc 2.0.9, freed pages kept 1000 ms" (or "... kept until exit",
// keep_freed_memory() or MIMALLOC_ALLOW_DECOMMIT=0; or "... given back
// lazily (MADV_FREE)", free_memory_lazily()) or "glibc malloc", for the
// version line and the log.
std::string allocator_name();

// How long mimalloc keeps pages freed in a thread's heap before it gives
// them back to the system (its default: 25 ms). Giving pages back is a
// madvise that flushes the TLB; taking them again, a page fault and a
// zeroed page each. At 25 ms, streams closing while others open paid that
// round trip over and over: with 9,000 slow streams opened at once, madvise
// was 4 % of the proxy's CPU samples (perf), and 1 s cut the CPU per event
// by 13 % (tests/bench/ab_cpu.sh; docs/performance.md, "The heap").
// Pages freed and taken again within the delay are never given back;
// after a burst, the server also collects each worker's heap.
constexpr long freed_pages_kept_ms = 1000;

// Sets the allocator's options (the delay above) at the process's start;
// nothing on glibc's heap, or where the operator set mimalloc's own
// environment variable for it (MIMALLOC_DECOMMIT_DELAY, or
// MIMALLOC_PURGE_DELAY from mimalloc 2.1).
void tune_allocator();

// Keeps the memory the heap frees for the process's life, as nginx's heap
// (glibc's) does, instead of giving it back a second after and once a
// burst is over (config: memory.after_burst: keep). Each burst after the
// first then finds its pages resident: on the virtual machines we measure
// on a page fault costs about 10 us, and a burst of 9,000 streams that
// took 26,000-31,000 pages afresh took 11-13 % more CPU than one that
// found them kept (tests/bench/bursts_kept.sh; docs/performance.md,
// "Memory kept after a burst"). The price: the peak's memory stays with
// the process. Call it before the threads that serve start: mimalloc 2.0
// reads the switch as it takes each new segment of memory from the system.
// give_back_free_memory() does nothing after it.
void keep_freed_memory();

// Gives the pages the heap frees back lazily (config: memory.after_burst:
// lazy_free): marked free with MADV_FREE but left mapped, where give_back
// unmaps them (MADV_DONTNEED). The kernel takes such a page only when it
// needs memory (a memory cgroup counts such pages as inactive file pages,
// which Kubernetes' working set leaves out); until then a write takes the
// page back without a fault. So the next burst finds its pages as after
// keep_freed_memory(), but the memory is the system's whenever it runs
// short. Resident memory (VmRSS) still counts the pages until the kernel
// takes them; /proc/PID/smaps_rollup shows them as LazyFree. Each page
// that mimalloc frees whole costs a madvise call (2,071 over two bursts of
// 9,000 streams). mimalloc only: glibc's heap has no such mode and gives
// memory back as with give_back. Call it before the threads that serve
// start, as keep_freed_memory().
void free_memory_lazily();

// Gives memory that a burst freed back to the system, where the allocator
// keeps it otherwise (glibc: malloc_trim, for the whole process; mimalloc:
// mi_collect, for the calling thread's heap and the process's cache of
// freed segments). True when it did; false after keep_freed_memory().
// mimalloc 2.0 gives back some of what was freed before the call only
// once its delay is over: call it again a second or two later.
bool give_back_free_memory();

// True when give_back_free_memory() acts on the calling thread's heap
// only (mimalloc), so that each worker must call it on its own thread.
bool heap_gives_back_per_thread();

}  // namespace tokengate
