#pragma once
// The one writer of the Prometheus text format (0.0.4) that /metrics is
// made of: each family's `# HELP` and `# TYPE` lines once, then its samples,
// their label values escaped as the format asks (backslash, double quote,
// newline), their values written as the page has always written them, so
// that dashboards and alert rules read the same bytes. Every module that
// adds families to the page writes them through it.
#include <charconv>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace tokengate::metrics {

enum class metric_type { counter, gauge, histogram };

// An integer value (a bool is none: write 1 or 0).
template <typename T>
concept integer_value = std::integral<T> && !std::same_as<T, bool>;

// A sample's value as text. Integers as they are; a double in one of the
// two ways the page has always used, chosen per family.
class sample_value {
 public:
  template <integer_value T>
  sample_value(T v) {  // (implicit: a count is a value as it is)
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
    text_.assign(digits, end);
  }
  // Six decimals, "0.250000" (C's %f: what std::to_string makes of a double).
  static sample_value fixed(double v);
  // Six significant digits, "0.25", "5e-05" (C's %g: what an ostream writes).
  static sample_value general(double v);

  std::string_view text() const { return text_; }

 private:
  explicit sample_value(std::string text) : text_(std::move(text)) {}
  std::string text_;
};

// A sample's labels, written out once as `route="chat",model="m"` in the
// order they were added. Label sets compare as that text: a map keyed by
// them lists its samples in the order the page always had.
class labels {
 public:
  labels() = default;
  labels(std::initializer_list<std::pair<std::string_view, std::string_view>> pairs);

  labels& add(std::string_view name, std::string_view value);
  // A copy with one more label (`outcome`, `le`) after these.
  labels with(std::string_view name, std::string_view value) const;

  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }
  auto operator<=>(const labels&) const = default;

 private:
  std::string text_;
};

class prometheus_text {
 public:
  // Starts a family: its HELP and TYPE lines. The samples written next
  // are its own, named after it.
  void family(std::string_view name, metric_type type, std::string_view help);

  // A counter's or gauge's sample: `name{labels} value`, or `name value`.
  void sample(const labels& set, const sample_value& value);
  void sample(const sample_value& value) { sample(labels{}, value); }

  // A histogram's samples for one label set: a cumulative `_bucket` per
  // bound (`le` written as %g), then `le="+Inf"`, `_sum` and `_count`.
  // `counts` holds each bucket's own count, the one past the last bound
  // last. `count` comes apart from them: read while workers record, the
  // two may differ by a request, and the page shows each as it was read.
  void histogram(const labels& set, std::span<const double> bounds,
                 std::span<const std::uint64_t> counts, const sample_value& sum,
                 std::uint64_t count);

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void line(std::string_view suffix, const labels& set, std::string_view value);

  std::string out_;
  std::string family_;  // the family being written
  metric_type type_ = metric_type::counter;
};

}  // namespace tokengate::metrics
