#include "metrics/cpu_wait.hpp"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "metrics/prometheus_text.hpp"

namespace tokengate::metrics {

std::optional<std::uint64_t> schedstat_wait_ns(std::string_view line) {
  auto space = line.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  auto rest = line.substr(space + 1);
  std::uint64_t wait = 0;
  auto [after, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), wait);
  if (ec != std::errc() || after == rest.data() || after == rest.data() + rest.size() ||
      *after != ' ')
    return std::nullopt;
  return wait;
}

std::optional<std::uint64_t> read_cpu_wait_ns() {
  std::error_code ec;
  std::filesystem::directory_iterator tasks("/proc/self/task", ec);
  if (ec) return std::nullopt;
  std::uint64_t total = 0;
  bool any = false;
  for (const auto& task : tasks) {
    std::ifstream in(task.path() / "schedstat");
    std::string line;
    // (A thread that ended since the listing has no file any more.)
    if (!std::getline(in, line)) continue;
    auto wait = schedstat_wait_ns(line);
    if (!wait) continue;
    total += *wait;
    any = true;
  }
  if (!any) return std::nullopt;
  return total;
}

std::string render_cpu_wait_prometheus(std::optional<std::uint64_t> wait_ns) {
  prometheus_text out;
  out.family("tokengate_cpu_wait_seconds_total", metric_type::counter,
             "Time the process's threads were ready to run but waited for a core (the "
             "scheduler's run queue), summed over its threads. Host steal on a VM is not in it.");
  if (wait_ns) out.sample(sample_value::fixed(static_cast<double>(*wait_ns) / 1e9));
  return out.take();
}

}  // namespace tokengate::metrics
