#include "http/trace_context.hpp"

#include <algorithm>
#include <random>

namespace tokengate {
namespace {

std::mt19937_64& rng() {
  thread_local std::mt19937_64 generator(std::random_device{}());
  return generator;
}

int lower_hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // (upper case is invalid in traceparent)
}

template <std::size_t N>
bool read_hex(std::string_view text, std::array<std::uint8_t, N>& out) {
  if (text.size() != 2 * N) return false;
  for (std::size_t i = 0; i < N; ++i) {
    int hi = lower_hex_digit(text[2 * i]), lo = lower_hex_digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return std::any_of(out.begin(), out.end(), [](std::uint8_t b) { return b != 0; });
}

template <std::size_t N>
std::array<std::uint8_t, N> random_id() {
  std::array<std::uint8_t, N> id{};
  while (std::all_of(id.begin(), id.end(), [](std::uint8_t b) { return b == 0; }))
    for (std::size_t i = 0; i < N; i += 8) {
      auto r = rng()();
      for (std::size_t j = 0; j < 8 && i + j < N; ++j)
        id[i + j] = static_cast<std::uint8_t>(r >> (8 * j));
    }
  return id;
}

}  // namespace

std::optional<parsed_traceparent> parse_traceparent(std::string_view v) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2.
  if (v.size() < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-') return std::nullopt;
  if (v.substr(0, 2) == "ff" || lower_hex_digit(v[0]) < 0 || lower_hex_digit(v[1]) < 0)
    return std::nullopt;
  if (v.substr(0, 2) == "00" && v.size() != 55) return std::nullopt;
  if (v.size() > 55 && v[55] != '-') return std::nullopt;  // (a later version's extra fields)
  parsed_traceparent out;
  if (!read_hex(v.substr(3, 32), out.trace) || !read_hex(v.substr(36, 16), out.parent))
    return std::nullopt;
  int hi = lower_hex_digit(v[53]), lo = lower_hex_digit(v[54]);
  if (hi < 0 || lo < 0) return std::nullopt;
  out.sampled = (lo & 1) != 0;
  return out;
}

std::string format_traceparent(const trace_id& trace, const span_id& span, bool sampled) {
  return "00-" + to_hex(trace) + "-" + to_hex(span) + (sampled ? "-01" : "-00");
}

trace_id new_trace_id() { return random_id<16>(); }
span_id new_span_id() { return random_id<8>(); }

std::string bounded_tracestate(std::string_view tracestate) {
  constexpr std::size_t max_members = 32, max_bytes = 512;
  std::size_t members = 0, kept = 0;  // (kept: the bytes of the whole members within the bound)
  for (std::size_t at = 0; at <= tracestate.size();) {
    auto comma = std::min(tracestate.find(',', at), tracestate.size());
    auto member = tracestate.substr(at, comma - at);
    if (member.find_first_not_of(" \t") != std::string_view::npos) {
      if (++members > max_members) return {};
      if (comma <= max_bytes) kept = comma;
    }
    at = comma + 1;
  }
  auto out = tracestate.substr(0, kept);
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t' || out.back() == ','))
    out.remove_suffix(1);
  return std::string(out);
}

trace_context begin_trace(std::string_view traceparent, std::string_view tracestate, double ratio) {
  trace_context t;
  t.active = true;
  t.span = new_span_id();
  if (auto parent = parse_traceparent(traceparent)) {
    t.trace = parent->trace;
    t.parent = parent->parent;
    t.sampled = parent->sampled;
    t.tracestate = bounded_tracestate(tracestate);
    return t;
  }
  t.trace = new_trace_id();
  t.sampled =
      ratio >= 1.0 || (ratio > 0 && std::uniform_real_distribution<double>(0, 1)(rng()) < ratio);
  return t;
}

}  // namespace tokengate
