#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "http/request_context.hpp"
#include "metrics/latency.hpp"
#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"

namespace tokengate::stream {

// Watches every event of the stream: timestamps tokens (TTFT, every gap
// between tokens), counts output, finds where to cut when an upstream
// overruns the limit, and which events to hold back from the client (the
// usage chunk we asked for on its behalf). Offsets are absolute positions
// in the upstream body. It runs synchronously on each chunk before the
// chunk is forwarded.
class stream_accounting final : public sse_sink {
 public:
  // `observed`: the dialect the upstream streams in (the client's, unless
  // the answer is translated).
  stream_accounting(request_context& ctx, const sse_parser& parser, std::optional<long long> limit,
                    metrics::series& series, metrics::route_windows& windows, dialect observed)
      : ctx_(ctx),
        parser_(parser),
        limit_(limit),
        series_(series),
        windows_(windows),
        observer_(observed) {
    drops_.reserve(4);
  }

  void begin_chunk(clock::time_point arrived) { arrived_ = arrived; }
  bool cut() const { return cut_; }
  std::uint64_t cut_at() const { return cut_at_; }
  // Absolute ranges not to forward, in order; the relay removes those it has used.
  std::vector<std::pair<std::uint64_t, std::uint64_t>>& drops() { return drops_; }
  const stream_facts& facts() const { return observer_.facts(); }
  // The output tokens the upstream reported for what was forwarded: at a
  // cut, as reported before the event cut off.
  std::optional<std::int64_t> output_tokens() const {
    return cut_ ? output_before_cut_ : observer_.facts().output_tokens;
  }

  void on_event(const stream::sse_event& event) override {
    if (cut_) return;
    auto reported_before = observer_.facts().output_tokens;
    observer_.on_event(event);
    ++ctx_.sse_events;
    auto kinds = observer_.last_kinds();
    if (kinds & content_kinds) {
      if (limit_ && produced() > *limit_) {
        cut_ = true;  // this event is one too many: forward up to its start
        cut_at_ = parser_.boundary();
        // Its usage (an engine that reports it in every chunk) counts a
        // token the client does not get.
        output_before_cut_ = reported_before;
        return;
      }
      if (ctx_.content_events++ == 0) {
        ctx_.first_token = arrived_;
      } else {
        auto gap = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(arrived_ - ctx_.last_token)
                .count());
        series_.inter_token.record_micros(gap);
        windows_.inter_token.record(gap, arrived_);
      }
      ctx_.last_token = arrived_;
    }
    // The usage-only chunk (choices: []) the client did not ask for.
    if (ctx_.usage_injected && kinds == kind_usage)
      drops_.emplace_back(parser_.boundary(), parser_.position());
  }

 private:
  // Content events, or the upstream's own live count where it reports one
  // (vLLM's continuous usage), whichever is larger.
  long long produced() const {
    auto events = static_cast<long long>(observer_.facts().content_events);
    long long reported = observer_.facts().output_tokens.value_or(0);
    return std::max(events, reported);
  }

  request_context& ctx_;
  const sse_parser& parser_;
  std::optional<long long> limit_;
  metrics::series& series_;
  metrics::route_windows& windows_;
  stream_observer observer_;
  clock::time_point arrived_;
  bool cut_ = false;
  std::uint64_t cut_at_ = 0;
  std::optional<std::int64_t> output_before_cut_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> drops_;
};

}  // namespace tokengate::stream
