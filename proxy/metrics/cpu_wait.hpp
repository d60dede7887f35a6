#pragma once
// How long the process's threads were ready to run but waited for a core:
// the scheduler's run-queue wait, summed over the threads alive at the
// scrape (/proc/self/task/*/schedstat, its second field, in nanoseconds).
// A relay delay that grows while this does is the machine's (other
// programs, kernel threads, a core shared by too many workers), not the
// proxy's own work. Time the hypervisor takes from a virtual machine
// (steal) is not in it: the guest never sees it as waiting (node
// exporter's node_cpu_seconds_total{mode="steal"} has it).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokengate::metrics {

// The run-queue wait of one schedstat line ("run_ns wait_ns slices"), in
// nanoseconds; none when malformed.
std::optional<std::uint64_t> schedstat_wait_ns(std::string_view line);

// This process's threads' run-queue wait, in nanoseconds; none where the
// kernel keeps no schedstat (CONFIG_SCHED_INFO off).
std::optional<std::uint64_t> read_cpu_wait_ns();

// tokengate_cpu_wait_seconds_total, declared always, sampled where known.
std::string render_cpu_wait_prometheus(std::optional<std::uint64_t> wait_ns);

}  // namespace tokengate::metrics
