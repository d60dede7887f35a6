#include "fleet/engine_gauges.hpp"

#include <array>
#include <charconv>

namespace tokengate::fleet {
namespace {

enum class gauge { running, waiting, kv, kv_tokens, cache_config };

struct known_metric {
  std::string_view name;
  gauge is;
};

constexpr std::array<known_metric, 13> known{{
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
    {"sglang:max_total_num_tokens", gauge::kv_tokens},
    {"vllm:cache_config_info", gauge::cache_config},
}};

// A label's value in NAME{a="1",b="2"} VALUE (nullopt when absent or not
// a whole number).
std::optional<long long> label_number(std::string_view line, std::string_view label) {
  const auto close = line.find('}');
  for (auto at = line.find(label); at != std::string_view::npos && at < close;
       at = line.find(label, at + 1)) {
    const char before = line[at - 1];
    if ((before != '{' && before != ',') || line.substr(at + label.size(), 2) != "=\"") continue;
    const auto digits = line.substr(at + label.size() + 2);
    long long v = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || *end != '"') return std::nullopt;
    return v;
  }
  return std::nullopt;
}

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
      case gauge::kv_tokens:
        g.kv_tokens = g.kv_tokens.value_or(0) + static_cast<long long>(*v);
        break;
      case gauge::cache_config: {
        const auto blocks = label_number(line, "num_gpu_blocks");
        const auto block_size = label_number(line, "block_size");
        if (blocks && block_size) g.kv_tokens = g.kv_tokens.value_or(0) + *blocks * *block_size;
        break;
      }
    }
  }
  if (!found) return std::nullopt;
  return g;
}

}  // namespace tokengate::fleet
