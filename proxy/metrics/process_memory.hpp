#pragma once
// The process's memory as the kernel counts it, for /metrics: what is
// resident (what dashboards and OOM policies read as RSS) and how much of
// that is lazily freed: pages the heap marked free with MADV_FREE
// (memory.after_burst: lazy_free), which the kernel takes back whenever it
// needs memory. Resident less lazily freed is what the process holds for
// good. Read from /proc at each scrape (smaps_rollup walks the process's
// mappings: about 60 us for the 96 of an idle proxy).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokengate::metrics {

// A "Name:   1234 kB" field of a /proc status-like text, in bytes; none
// when the field is missing or malformed.
std::optional<std::uint64_t> kilobytes_field(std::string_view text, std::string_view name);

struct process_memory {
  std::optional<std::uint64_t> resident_bytes;  // VmRSS, /proc/self/status
  std::optional<std::uint64_t>
      lazily_freed_bytes;  // LazyFree, /proc/self/smaps_rollup (Linux 4.14+)
};

process_memory read_process_memory();

// process_resident_memory_bytes (the name Prometheus' client libraries
// give it) and tokengate_memory_lazily_freed_bytes, each declared always
// and sampled where known.
std::string render_process_memory_prometheus(const process_memory& memory);

}  // namespace tokengate::metrics
