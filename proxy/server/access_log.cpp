#include "server/access_log.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <spdlog/spdlog.h>

namespace tokengate {
namespace {

// Microseconds as an integer (-1 when the phase never happened): exact,
// and easy to sort and sum in a log pipeline.
std::int64_t us_between(clock::time_point from, clock::time_point to) {
  if (from == clock::time_point{} || to == clock::time_point{}) return -1;
  return std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
}

}  // namespace

void log_access(const request_context& ctx) {
  if (!spdlog::default_logger()->should_log(spdlog::level::info)) return;
  boost::json::object line{
      {"request_id", ctx.request_id},
      {"method", ctx.method},
      {"path", ctx.path},
      {"upstream", ctx.upstream},
      {"status", ctx.status},
      {"streamed", ctx.streamed},
      {"sse_events", ctx.sse_events},
      {"bytes_out", ctx.bytes_to_client},
      {"upstream_header_us", us_between(ctx.request_read, ctx.upstream_headers)},
      {"first_event_us", us_between(ctx.request_read, ctx.first_event)},
      {"duration_us", us_between(ctx.received, ctx.finished)},
      {"client_cancelled", ctx.client_gone},
      {"stream_failed", ctx.upstream_failed_midstream},
  };
  if (!ctx.error.empty()) line["error"] = ctx.error;
  spdlog::info("access {}", boost::json::serialize(line));
}

}  // namespace tokengate
