#include "server/request_record.hpp"

#include "metrics/latency.hpp"
#include "server/access_log.hpp"
#include "server/worker.hpp"
#include "trace/exporter.hpp"
#include "trace/request_spans.hpp"

namespace tokengate {
namespace {

std::optional<std::uint64_t> micros_between(clock::time_point from, clock::time_point to) {
  if (from == clock::time_point{} || to == clock::time_point{} || to < from) return std::nullopt;
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(to - from).count());
}

metrics::outcome outcome_of(const request_context& ctx) {
  if (ctx.client_gone) return metrics::outcome::cancelled;
  if (ctx.upstream_failed_midstream) return metrics::outcome::stream_failed;
  if (ctx.status == 504) return metrics::outcome::timeout;
  if (ctx.status >= 500) return metrics::outcome::upstream_error;
  if (ctx.status >= 400) return metrics::outcome::client_error;
  return metrics::outcome::success;
}

}  // namespace

void record_request(worker& w, const request_context& ctx) {
  auto now = ctx.finished;
  auto& series = w.latency().series_for(ctx.route, ctx.model_label, ctx.upstream);
  auto& windows = w.latency().windows_for(ctx.route);
  metrics::bump(series.requests[static_cast<std::size_t>(outcome_of(ctx))], std::uint64_t{1});

  if (auto v = micros_between(ctx.request_read, ctx.first_token_written)) {
    series.ttft.record_micros(*v);
    windows.ttft.record(*v, now);
  }
  if (auto v = micros_between(ctx.request_sent, ctx.first_token))
    series.upstream_ttft.record_micros(*v);
  if (auto v = micros_between(ctx.request_sent, ctx.upstream_headers))
    series.upstream_first_byte.record_micros(*v);
  if (ctx.content_events > 1) {
    if (auto span = micros_between(ctx.first_token, ctx.last_token)) {
      auto tpot = *span / (ctx.content_events - 1);
      series.time_per_output_token.record_micros(tpot);
      windows.time_per_output_token.record(tpot, now);
    }
  }
  if (ctx.status != 0) {
    if (auto v = micros_between(ctx.request_read, ctx.finished)) {
      series.duration.record_micros(*v);
      windows.duration.record(*v, now);
    }
  }
  if (ctx.input_tokens && *ctx.input_tokens > 0)
    metrics::bump(series.input_tokens, static_cast<std::uint64_t>(*ctx.input_tokens));
  if (ctx.cached_tokens && *ctx.cached_tokens > 0)
    metrics::bump(series.cache_read_tokens, static_cast<std::uint64_t>(*ctx.cached_tokens));
  if (ctx.cache_write_tokens && *ctx.cache_write_tokens > 0)
    metrics::bump(series.cache_write_tokens, static_cast<std::uint64_t>(*ctx.cache_write_tokens));
  // Usage where the upstream reported it; counted content events otherwise.
  auto output = ctx.output_tokens ? *ctx.output_tokens : static_cast<long long>(ctx.content_events);
  if (output > 0) metrics::bump(series.output_tokens, static_cast<std::uint64_t>(output));

  if (ctx.limit_clamped) windows.limit_clamped.add();
  if (ctx.limit_enforced) windows.limit_cut.add();
  if (ctx.error) {
    w.metrics().errors.add(side_name(ctx.error->side), ctx.error->code);
    windows.errors.add(side_name(ctx.error->side), ctx.error->code);
  }
  w.slowest().offer(ctx);
  log_access(ctx);
  if (ctx.trace.sampled && w.tracer()) w.tracer()->submit(trace::spans_for(ctx, *w.snapshot()));
}

}  // namespace tokengate
