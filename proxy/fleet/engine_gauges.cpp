#include "fleet/engine_gauges.hpp"

#include <array>
#include <charconv>

namespace tokengate::fleet {
namespace {

enum class gauge { running, waiting, kv };

struct known_metric {
  std::string_view name;
  gauge is;
};

constexpr std::array<known_metric, 11> known{{
    {"vllm:num_requests_running", gauge::running},
    {"vllm:num_requests_waiting", gauge::waiting},
    {"vllm:kv_cache_usage_perc", gauge::kv},
    {"sglang:num_running_reqs", gauge::running},
    {"sglang:num_queue_reqs", gauge::waiting},
    {"sglang:token_usage", gauge::kv},
    {"tgi_batch_current_size", gauge::running},
    {"tgi_queue_size", gauge::waiting},
    {"llamacpp:requests_processing", gauge::running},
    {"llamacpp:requests_deferred", gauge::waiting},
    {"llamacpp:kv_cache_usage_ratio", gauge::kv},
}};

std::optional<double> value_of(std::string_view line) {
  // NAME{labels} VALUE [TIMESTAMP]: the value is the first field after
  // the name and its labels.
  auto close = line.find('}');
  auto rest = line.substr(close == std::string_view::npos ? 0 : close + 1);
  auto space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  rest = rest.substr(rest.find_first_not_of(' ', space));
  double v = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc()) return std::nullopt;
  return v;
}

const known_metric* metric_of(std::string_view line) {
  for (const auto& m : known)
    if (line.starts_with(m.name) && line.size() > m.name.size() &&
        (line[m.name.size()] == '{' || line[m.name.size()] == ' '))
      return &m;
  return nullptr;
}

}  // namespace

std::optional<engine_gauges> read_engine_gauges(std::string_view text) {
  engine_gauges g;
  bool found = false;
  while (!text.empty()) {
    auto eol = text.find('\n');
    auto line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (line.empty() || line.front() == '#') continue;
    const auto* m = metric_of(line);
    if (!m) continue;
    auto v = value_of(line);
    if (!v) continue;
    switch (m->is) {
      case gauge::running:
        g.running += *v;
        found = true;
        break;
      case gauge::waiting:
        g.waiting += *v;
        break;
      case gauge::kv:
        g.kv_usage = g.kv_usage.value_or(0) + *v;
        break;
    }
  }
  if (!found) return std::nullopt;
  return g;
}

}  // namespace tokengate::fleet
