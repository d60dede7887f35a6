#include "budget/ledger.hpp"

#include <chrono>

#include "scan/hex.hpp"

namespace tokengate::budget {
namespace {

constexpr std::int64_t minute_ms = 60'000;
constexpr std::int64_t day_ms = 86'400'000;

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - (a % b < 0 ? 1 : 0); }

window calendar_month(std::int64_t now_ms) {
  using namespace std::chrono;
  const sys_days today{days{floor_div(now_ms, day_ms)}};
  const year_month_day ymd{today};
  const sys_days first{ymd.year() / ymd.month() / 1};
  const sys_days next{(ymd.year() / ymd.month() + months{1}) / 1};
  return {first.time_since_epoch().count() * day_ms, next.time_since_epoch().count() * day_ms};
}

}  // namespace

window window_of(limit_kind kind, std::int64_t now_ms) {
  switch (kind) {
    case limit_kind::requests_per_minute:
    case limit_kind::tokens_per_minute: {
      auto start = floor_div(now_ms, minute_ms) * minute_ms;
      return {start, start + minute_ms};
    }
    case limit_kind::tokens_per_day:
    case limit_kind::usd_per_day: {
      auto start = floor_div(now_ms, day_ms) * day_ms;
      return {start, start + day_ms};
    }
    case limit_kind::usd_per_month:
      return calendar_month(now_ms);
    case limit_kind::concurrent_streams:
      return {};
  }
  return {};
}

std::string new_reservation_id() { return random_hex_128(); }

std::vector<long long> settle_deltas(const demand& d, const usage& real) {
  std::vector<long long> deltas;
  deltas.reserve(d.counters.size());
  for (const auto& c : d.counters) deltas.push_back(amount_of(c.kind, real, d) - c.amount);
  return deltas;
}

std::vector<long long> give_back_deltas(const demand& d) {
  std::vector<long long> deltas;
  deltas.reserve(d.counters.size());
  for (const auto& c : d.counters) deltas.push_back(-c.amount);
  return deltas;
}

}  // namespace tokengate::budget
