#pragma once
// A finished span as OTLP carries it: ids, name, kind, times in Unix
// nanoseconds, attributes, events and a status.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "http/trace_context.hpp"

namespace tokengate::trace {

using attribute_value =
    std::variant<std::string, std::int64_t, double, bool, std::vector<std::string>>;
struct attribute {
  std::string key;
  attribute_value value;
};

struct span_event {
  std::string name;
  std::uint64_t time_ns = 0;
  std::vector<attribute> attributes;
};

enum class span_kind { server = 2, client = 3 };          // OTLP's numbers
enum class span_status { unset = 0, ok = 1, error = 2 };  // (the same)

struct span {
  trace_id trace{};
  span_id id{};
  span_id parent{};  // all zero: a root span
  std::string name;
  span_kind kind = span_kind::server;
  std::uint64_t start_ns = 0, end_ns = 0;
  std::vector<attribute> attributes;
  std::vector<span_event> events;
  span_status status = span_status::unset;
  std::string status_message;
};

}  // namespace tokengate::trace
