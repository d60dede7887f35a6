#include "metrics/prometheus_text.hpp"

#include <cassert>
#include <cstdio>

namespace tokengate::metrics {
namespace {

// A double through printf's `format` ("%f", "%g"): what std::to_string and
// an ostream have always written on this page, byte for byte.
std::string printed(const char* format, double v) {
  char small[32];
  int n = std::snprintf(small, sizeof small, format, v);
  if (n < 0) return {};
  if (static_cast<std::size_t>(n) < sizeof small)
    return std::string(small, static_cast<std::size_t>(n));
  std::string large(static_cast<std::size_t>(n), '\0');  // (%f of a huge value)
  std::snprintf(large.data(), large.size() + 1, format, v);
  return large;
}

// A label value: backslash, double quote and newline escaped.
void append_label_value(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
}

// HELP text: backslash and newline escaped (a double quote stays).
void append_help(std::string& out, std::string_view help) {
  for (char c : help) {
    if (c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
}

std::string_view type_name(metric_type type) {
  switch (type) {
    case metric_type::counter:
      return "counter";
    case metric_type::gauge:
      return "gauge";
    case metric_type::histogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

sample_value sample_value::fixed(double v) { return sample_value(printed("%f", v)); }

sample_value sample_value::general(double v) { return sample_value(printed("%g", v)); }

labels::labels(std::initializer_list<std::pair<std::string_view, std::string_view>> pairs) {
  for (const auto& [name, value] : pairs) add(name, value);
}

labels& labels::add(std::string_view name, std::string_view value) {
  if (!text_.empty()) text_ += ',';
  text_ += name;
  text_ += "=\"";
  append_label_value(text_, value);
  text_ += '"';
  return *this;
}

labels labels::with(std::string_view name, std::string_view value) const {
  labels more = *this;
  more.add(name, value);
  return more;
}

void prometheus_text::family(std::string_view name, metric_type type, std::string_view help) {
  family_.assign(name);
  type_ = type;
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  append_help(out_, help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type_name(type);
  out_ += '\n';
}

void prometheus_text::sample(const labels& set, const sample_value& value) {
  assert(!family_.empty() && type_ != metric_type::histogram);
  line("", set, value.text());
}

void prometheus_text::histogram(const labels& set, std::span<const double> bounds,
                                std::span<const std::uint64_t> counts, const sample_value& sum,
                                std::uint64_t count) {
  assert(type_ == metric_type::histogram && counts.size() == bounds.size() + 1);
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b <= bounds.size(); ++b) {
    cumulative += b < counts.size() ? counts[b] : 0;
    auto le = b < bounds.size() ? printed("%g", bounds[b]) : std::string("+Inf");
    line("_bucket", set.with("le", le), sample_value(cumulative).text());
  }
  line("_sum", set, sum.text());
  line("_count", set, sample_value(count).text());
}

void prometheus_text::line(std::string_view suffix, const labels& set, std::string_view value) {
  out_ += family_;
  out_ += suffix;
  if (!set.empty()) {
    out_ += '{';
    out_ += set.text();
    out_ += '}';
  }
  out_ += ' ';
  out_ += value;
  out_ += '\n';
}

}  // namespace tokengate::metrics
