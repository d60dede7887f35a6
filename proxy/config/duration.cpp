#include "config/duration.hpp"

#include <charconv>

namespace tokengate::config {

std::optional<duration> parse_duration(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || value < 0) return std::nullopt;
  std::string_view unit(end, text.data() + text.size() - end);
  double ms_per_unit = 0;
  if (unit.empty() || unit == "s")
    ms_per_unit = 1000;
  else if (unit == "ms")
    ms_per_unit = 1;
  else if (unit == "m")
    ms_per_unit = 60'000;
  else if (unit == "h")
    ms_per_unit = 3'600'000;
  else
    return std::nullopt;
  double ms = value * ms_per_unit;
  if (ms > 1e12) return std::nullopt;  // nobody means a timeout of 30 years
  return duration(static_cast<long long>(ms));
}

}  // namespace tokengate::config
