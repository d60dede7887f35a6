#include "server/access_log.hpp"

#include <spdlog/spdlog.h>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cmath>

namespace tokengate {
namespace {

// Microseconds as an integer (-1 when the phase never happened): exact,
// and easy to sort and sum in a log pipeline.
std::int64_t us_between(clock::time_point from, clock::time_point to) {
  if (from == clock::time_point{} || to == clock::time_point{}) return -1;
  return std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
}

// Decode speed as the client saw it: token events after the first, over the
// time they took.
double tokens_per_second(const request_context& ctx) {
  if (ctx.content_events < 2) return 0;
  auto seconds = std::chrono::duration<double>(ctx.last_token - ctx.first_token).count();
  return seconds > 0 ? std::round(static_cast<double>(ctx.content_events - 1) / seconds * 10) / 10
                     : 0;
}

// The upstream's prompt cache, where its usage says (parts of input_tokens).
void add_prompt_cache(boost::json::object& line, const request_context& ctx) {
  if (!ctx.cached_tokens && !ctx.cache_write_tokens) return;
  line["cache_read_tokens"] = ctx.cached_tokens.value_or(0);
  line["cache_write_tokens"] = ctx.cache_write_tokens.value_or(0);
}

}  // namespace

void log_access(const request_context& ctx) {
  if (!spdlog::default_logger()->should_log(spdlog::level::info)) return;
  auto optional_int = [](const std::optional<long long>& v) {
    return v ? boost::json::value(*v) : boost::json::value(nullptr);
  };
  boost::json::object line{
      {"request_id", ctx.request_id},
      {"method", ctx.method},
      {"path", ctx.path},
      {"route", ctx.route},
      {"model", ctx.model.size() <= 128 ? ctx.model : ctx.model.substr(0, 128)},
      {"upstream", ctx.upstream},
      {"attempts", ctx.attempts},
      {"resumes", ctx.resumes},
      {"resumed_at_token", ctx.resumed_at_token},
      {"resume_mode",
       ctx.resume_mode.empty() ? boost::json::value(nullptr) : boost::json::value(ctx.resume_mode)},
      {"fleet_predicted_ttft_ms", ctx.fleet_predicted_ms < 0
                                      ? boost::json::value(nullptr)
                                      : boost::json::value(std::round(ctx.fleet_predicted_ms))},
      {"fleet_matched_tokens", ctx.fleet_matched_tokens},
      {"fleet_reason", ctx.fleet_reason.empty() ? boost::json::value(nullptr)
                                                : boost::json::value(ctx.fleet_reason)},
      {"status", ctx.status},
      {"streamed", ctx.streamed},
      {"ttft_us", us_between(ctx.request_read, ctx.first_token_written)},
      {"upstream_ttft_us", us_between(ctx.request_sent, ctx.first_token)},
      {"queue_wait_us", us_between(ctx.request_read, ctx.admitted)},
      {"upstream_connect_us", us_between(ctx.request_read, ctx.upstream_connected)},
      {"forwarded_early", ctx.forwarded_early},
      {"upstream_first_byte_us", us_between(ctx.request_sent, ctx.upstream_headers)},
      {"duration_us", us_between(ctx.request_read, ctx.finished)},
      {"input_tokens", optional_int(ctx.input_tokens)},
      {"output_tokens", optional_int(ctx.output_tokens)},
      {"token_events", ctx.content_events},
      {"output_tokens_per_second", tokens_per_second(ctx)},
      {"sse_events", ctx.sse_events},
      {"bytes_out", ctx.bytes_to_client},
      {"limit", ctx.limit_clamped    ? "clamped"
                : ctx.limit_injected ? "injected"
                : ctx.limit_enforced ? "enforced"
                                     : ""},
      {"client_cancelled", ctx.client_gone},
      {"stream_failed", ctx.upstream_failed_midstream},
  };
  if (ctx.limit_enforced) line["limit"] = "enforced";
  if (!ctx.cache.empty()) line["cache"] = ctx.cache;  // a route with a response cache
  add_prompt_cache(line, ctx);
  // (A log line leads to its trace, where the trace was exported.)
  if (ctx.trace.sampled) line["trace_id"] = to_hex(ctx.trace.trace);
  if (ctx.error) {
    line["error"] = ctx.error->message;
    line["error_side"] = side_name(ctx.error->side);
    line["error_code"] = ctx.error->code;
  }
  spdlog::info("access {}", boost::json::serialize(line));
}

}  // namespace tokengate
