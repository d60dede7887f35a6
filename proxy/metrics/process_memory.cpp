#include "metrics/process_memory.hpp"

#include <charconv>
#include <fstream>
#include <sstream>

#include "metrics/prometheus_text.hpp"

namespace tokengate::metrics {
namespace {

std::string read_whole(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void memory_gauge(prometheus_text& out, const char* name, const char* help,
                  const std::optional<std::uint64_t>& value) {
  out.family(name, metric_type::gauge, help);
  if (value) out.sample(*value);
}

}  // namespace

std::optional<std::uint64_t> kilobytes_field(std::string_view text, std::string_view name) {
  for (std::size_t at = 0; at < text.size();) {
    auto end = text.find('\n', at);
    auto line = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? text.size() : end + 1;
    if (line.size() <= name.size() || line.substr(0, name.size()) != name ||
        line[name.size()] != ':')
      continue;
    auto rest = line.substr(name.size() + 1);
    auto digits = rest.find_first_not_of(" \t");
    if (digits == std::string_view::npos) return std::nullopt;
    std::uint64_t kilobytes = 0;
    auto [after, ec] = std::from_chars(rest.data() + digits, rest.data() + rest.size(), kilobytes);
    if (ec != std::errc() || std::string_view(after, rest.data() + rest.size()) != " kB")
      return std::nullopt;
    return kilobytes * 1024;
  }
  return std::nullopt;
}

process_memory read_process_memory() {
  return {kilobytes_field(read_whole("/proc/self/status"), "VmRSS"),
          kilobytes_field(read_whole("/proc/self/smaps_rollup"), "LazyFree")};
}

std::string render_process_memory_prometheus(const process_memory& memory) {
  prometheus_text out;
  memory_gauge(out, "process_resident_memory_bytes",
               "Resident memory of the process (RSS), lazily freed pages included.",
               memory.resident_bytes);
  memory_gauge(out, "tokengate_memory_lazily_freed_bytes",
               "Of the resident memory, pages the heap marked free (MADV_FREE, memory.after_burst: "
               "lazy_free): the kernel takes them back when it needs memory.",
               memory.lazily_freed_bytes);
  return out.take();
}

}  // namespace tokengate::metrics
