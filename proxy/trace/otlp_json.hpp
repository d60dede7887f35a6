#pragma once
// Spans as one OTLP/HTTP JSON export request body
// (ExportTraceServiceRequest: resourceSpans → scopeSpans → spans; ids in
// hex, times as decimal strings of Unix nanoseconds).
#include <string>
#include <utility>
#include <vector>

#include "trace/span.hpp"

namespace tokengate::trace {

std::string otlp_json(const std::vector<std::pair<std::string, std::string>>& resource,
                      const std::vector<span>& spans);

}  // namespace tokengate::trace
