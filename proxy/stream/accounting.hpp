#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/request_context.hpp"
#include "metrics/latency.hpp"
#include "stream/cached_tokens.hpp"
#include "stream/observer.hpp"
#include "stream/resume_splice.hpp"
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
  // `resume_buffer`: the stream may be resumed (exchange_plan::resume)
  // while its text stays within this many bytes: its text is kept (a
  // recording observer), and an error event is held back from the client
  // (upstream_error) rather than passed on as the stream's end. Past it
  // the text is let go and the stream is relayed as any other. 0: not
  // resumable.
  stream_accounting(request_context& ctx, const sse_parser& parser, std::optional<long long> limit,
                    metrics::series& series, metrics::route_windows& windows, dialect observed,
                    std::size_t resume_buffer = 0)
      : ctx_(ctx),
        parser_(parser),
        limit_(limit),
        series_(series),
        windows_(windows),
        observer_(observed, resume_buffer > 0),
        observed_(observed),
        resumable_(resume_buffer > 0),
        resume_buffer_(resume_buffer) {
    drops_.reserve(4);
    if (resumable_) [[unlikely]]
      identity_ = std::make_unique<upstream::stream_identity>();
  }

  // A resumed stream: the text the client already has. The upstream's
  // events are held back until their text has covered it exactly, then
  // passed on. A stream whose text differs (sampling), falls across its end
  // mid-event, or ends first has diverged: it is cut where it diverged.
  void catch_up(std::string delivered) {
    catching_up_ = std::make_unique<catching_up>(std::move(delivered));
    identity_.reset();  // (the client's names are the first attempt's)
  }
  // resume: prefill. A stream continued by the upstream from what the
  // client has (`delivered`, `tokens` content events): the new attempt's
  // opening is held back up to its first content, which is passed on; the
  // output limit counts the tokens sent before.
  void continue_after(std::string delivered, std::size_t tokens) {
    prefilled_ = std::make_unique<prefilled>(std::move(delivered), tokens);
    identity_.reset();
  }
  // The text the client has been sent, for a resume: as recorded (choice
  // 0), after what a prefill attempt continued from.
  std::string client_text() const {
    auto text = prefilled_ ? prefilled_->text : std::string();
    return text.append(delivered_text());
  }
  // The last event was held back from the client (caught up, or an error
  // event of a resumable stream): a translation must not pass it on.
  bool held_back() const { return held_back_; }
  // The names the client has read the stream under (resumable streams).
  upstream::stream_identity take_identity() {
    return identity_ ? std::move(*identity_) : upstream::stream_identity();
  }
  bool diverged() const { return diverged_; }
  bool resumable() const { return resumable_; }
  // An error event came (held back: resumable streams only).
  bool upstream_error() const { return upstream_error_; }
  // The text the client has been sent, for a resume: as recorded (choice 0).
  std::string_view delivered_text() const {
    const auto& t = observer_.facts().text_by_choice;
    return t.empty() ? std::string_view() : std::string_view(t.begin()->second);
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
    auto reported = cut_ ? output_before_cut_ : observer_.facts().output_tokens;
    if (reported && prefilled_) *reported += static_cast<std::int64_t>(prefilled_->tokens);
    return reported;
  }

  void on_event(const stream::sse_event& event) override {
    if (cut_) return;
    held_back_ = false;
    if (catching_up_) [[unlikely]]
      return swallow(event, *catching_up_);
    auto reported_before = observer_.facts().output_tokens;
    observer_.on_event(event);
    ++ctx_.sse_events;
    auto kinds = observer_.last_kinds();
    if (prefilled_ && prefilled_->opening) [[unlikely]] {
      if (!(kinds & content_kinds)) return hold_back();
      prefilled_->opening = false;
    }
    if (resumable_) [[unlikely]] {
      if (kinds & kind_error) {
        upstream_error_ = true;  // (the relay resumes, or ends the stream with its own)
        return hold_back();
      }
      if (identity_) learn_identity(observed_, event, *identity_);
      if (delivered_text().size() + (prefilled_ ? prefilled_->text.size() : 0) > resume_buffer_) {
        resumable_ = false;
        observer_.stop_recording();
        identity_.reset();
      }
    }
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
        if (ctx_.on_first_token) std::exchange(ctx_.on_first_token, nullptr)->first_token();
      } else {
        auto gap = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(arrived_ - ctx_.last_token)
                .count());
        series_.inter_token.record_micros(gap);
        windows_.inter_token.record(gap, arrived_);
      }
      ctx_.last_token = arrived_;
    }
    // The prompt tokens the upstream read from its cache (budgets price
    // them apart): looked for in a usage event without content, a stream's
    // last usage (once a stream), or in every one where the fleet asks.
    if ((kinds & kind_usage) && (ctx_.wants_cached_tokens || !(kinds & content_kinds))) [[unlikely]]
      if (auto cached = cached_tokens_in(event.data)) ctx_.cached_tokens = cached;
    // The usage-only chunk (choices: []) the client did not ask for.
    if (ctx_.usage_injected && kinds == kind_usage)
      drops_.emplace_back(parser_.boundary(), parser_.position());
  }

 private:
  void hold_back() {
    held_back_ = true;
    drops_.emplace_back(parser_.boundary(), parser_.position());
  }
  struct prefilled {
    prefilled(std::string t, std::size_t n) : text(std::move(t)), tokens(n) {}
    std::string text;
    std::size_t tokens;
    bool opening = true;
  };

  // While catching up: each event's text must be the next of what the
  // client has; everything else of the stream's opening is held back.
  struct catching_up {
    explicit catching_up(std::string text) : delivered(std::move(text)) {}
    std::string delivered;
    std::size_t matched = 0;
  };
  void swallow(const stream::sse_event& event, catching_up& c) {
    auto before = delivered_text().size();
    observer_.on_event(event);
    auto kinds = observer_.last_kinds();
    auto text = delivered_text().substr(std::min(before, delivered_text().size()));
    const bool in_step = (kinds & ~(kind_text | kind_usage | kind_ignored)) == 0 &&
                         std::string_view(c.delivered).substr(c.matched).starts_with(text);
    if (!in_step) {
      diverged_ = cut_ = true;
      cut_at_ = parser_.boundary();
      return;
    }
    c.matched += text.size();
    hold_back();
    if (c.matched == c.delivered.size()) catching_up_.reset();  // caught up
  }

  // Content events, or the upstream's own live count where it reports one
  // (vLLM's continuous usage), whichever is larger.
  long long produced() const {
    auto events = static_cast<long long>(observer_.facts().content_events);
    long long reported = observer_.facts().output_tokens.value_or(0);
    long long before = prefilled_ ? static_cast<long long>(prefilled_->tokens) : 0;
    return before + std::max(events, reported);
  }

  request_context& ctx_;
  const sse_parser& parser_;
  std::optional<long long> limit_;
  metrics::series& series_;
  metrics::route_windows& windows_;
  stream_observer observer_;
  dialect observed_;
  clock::time_point arrived_;
  bool cut_ = false;
  std::uint64_t cut_at_ = 0;
  std::optional<std::int64_t> output_before_cut_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> drops_;
  bool resumable_ = false;
  std::size_t resume_buffer_ = 0;
  bool upstream_error_ = false;
  bool diverged_ = false;
  bool held_back_ = false;
  std::unique_ptr<upstream::stream_identity> identity_;  // (resumable streams)
  std::unique_ptr<catching_up> catching_up_;  // (a resumed stream's, until it has caught up)
  std::unique_ptr<prefilled> prefilled_;      // (a stream resumed by a prefill)
};

}  // namespace tokengate::stream
