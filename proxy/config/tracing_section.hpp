#pragma once
// `tracing:` (trace/): where spans are exported, with which headers and
// resource attributes, how many are sampled, and the batcher's bounds.
#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace tokengate::config {

tracing_settings read_tracing(const reader& r);

}  // namespace tokengate::config
