#include "server/slow_requests.hpp"

#include <algorithm>

namespace tokengate {
namespace {

std::int64_t micros(clock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

std::int64_t nanos(clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

slow_request entry_of(const request_context& ctx, std::int64_t rank_us, std::int64_t ttft_us) {
  slow_request r;
  r.rank_us = rank_us;
  r.ttft_us = ttft_us;
  r.duration_us = micros(ctx.finished - ctx.request_read);
  r.status = ctx.status;
  r.route = ctx.route;
  r.model = ctx.model.substr(0, 128);
  r.upstream = ctx.upstream;
  r.request_id = ctx.request_id;
  if (ctx.trace.sampled) r.trace_id = to_hex(ctx.trace.trace);
  r.finished = ctx.finished;
  r.finished_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  return r;
}

}  // namespace

void slow_requests::offer(const request_context& ctx) {
  if (ctx.request_read == clock::time_point{} || ctx.finished < ctx.request_read) return;
  const bool token = ctx.first_token_written != clock::time_point{};
  const auto ttft = token ? micros(ctx.first_token_written - ctx.request_read) : -1;
  const auto rank = token ? ttft : micros(ctx.finished - ctx.request_read);
  if (rank < floor_us_.load(std::memory_order_relaxed) &&
      nanos(ctx.finished) < first_expiry_ns_.load(std::memory_order_relaxed))
    return;
  std::lock_guard lock(mutex_);
  drop_expired(ctx.finished);
  if (list_.size() < kept) {
    list_.push_back(entry_of(ctx, rank, ttft));
  } else {
    auto fastest = std::min_element(list_.begin(), list_.end(), [](const auto& a, const auto& b) {
      return a.rank_us < b.rank_us;
    });
    if (rank > fastest->rank_us) *fastest = entry_of(ctx, rank, ttft);
  }
  set_fast_path();
}

void slow_requests::drop_expired(clock::time_point now) {
  std::erase_if(list_, [&](const slow_request& r) { return r.finished + window <= now; });
}

void slow_requests::set_fast_path() {
  // (Until the list is full, every request may enter it.)
  std::int64_t floor = 0, first_expiry = 0;
  if (list_.size() == kept) {
    floor = list_.front().rank_us;
    first_expiry = nanos(list_.front().finished + window);
    for (const auto& r : list_) {
      floor = std::min(floor, r.rank_us);
      first_expiry = std::min(first_expiry, nanos(r.finished + window));
    }
  }
  floor_us_.store(floor, std::memory_order_relaxed);
  first_expiry_ns_.store(first_expiry, std::memory_order_relaxed);
}

void slow_requests::collect(std::vector<slow_request>& out, clock::time_point now) const {
  std::lock_guard lock(mutex_);
  for (const auto& r : list_)
    if (r.finished + window > now) out.push_back(r);
}

std::vector<slow_request> slowest_of(std::vector<slow_request> all, std::size_t count) {
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.rank_us > b.rank_us; });
  if (all.size() > count) all.resize(count);
  return all;
}

}  // namespace tokengate
