#include "server/resumption.hpp"

#include "resume/prefill_request.hpp"
#include "server/worker.hpp"
#include "translate/translation.hpp"

namespace tokengate {
namespace {

// The dialect an attempt's target answers in.
dialect answers_in(const upstream::exchange_plan& plan, std::size_t attempt,
                   const request_context& ctx) {
  if (attempt >= plan.translations.size() || !plan.translations[attempt]) return ctx.dialect;
  return plan.translations[attempt]->answers_in;
}

bool translated(const upstream::exchange_plan& plan, std::size_t attempt) {
  return attempt < plan.translations.size() && plan.translations[attempt];
}

}  // namespace

resumption::resumption(worker& w, upstream::exchange_state& s, const upstream::exchange_plan& plan)
    : w_(w), s_(s), plan_(plan) {
  s.resumes_left = plan.resume.mode == config::resume_mode::off ? 0 : plan.resume.max_resumes;
}

// resume: prefill, where the target's API has assistant messages; a
// translated attempt restarts (its usage is the translator's to tell).
void resumption::before_attempt(const client_request& request, std::size_t from) {
  s_.prefill.reset();
  if (!resumed_ || plan_.resume.mode != config::resume_mode::prefill || prefill_refused_ ||
      from >= plan_.upstreams.size() || translated(plan_, from))
    return;
  const auto original = body_text(request);
  auto body = upstream::apply_splices(original, plan_.edits[from]);
  auto prefilled = resume::prefill_body(body, answers_in(plan_, from, s_.ctx), resumed_->delivered,
                                        resumed_->delivered_tokens);
  if (!prefilled) return;
  s_.prefill = std::make_unique<upstream::prefill_attempt>(upstream::prefill_attempt{
      from, {upstream::splice{0, original.size(), std::move(*prefilled)}}});
}

bool resumption::prefill_refused(const upstream::answer& got) {
  if (!s_.prefills(got.attempt) || got.head.status < 400 || got.head.status >= 500) return false;
  count("prefill_refused");
  prefill_refused_ = true;  // (for the rest of the request: restart)
  if (s_.upstream) s_.upstream->stream.close();
  s_.upstream.reset();
  s_.prefill.reset();
  return true;
}

stream::answer_translator* resumption::translator_for(const upstream::answer& got) {
  auto& ctx = s_.ctx;
  if (!resumed_) {
    translator_ = translated(plan_, got.attempt)
                      ? translate::answer_translator_for(
                            ctx.dialect, plan_.translations[got.attempt]->answers_in,
                            plan_.usage_asked, ctx.model)
                      : nullptr;
    return translator_.get();
  }
  if (!translator_)  // (a stream in the client's API: its names kept across attempts)
    translator_ = std::make_unique<stream::resume_splice>(
        ctx.dialect, std::move(resumed_->identity), ctx.usage_injected);
  translator_->on_resumed();
  mode_ = mode_of(got);
  ctx.resume_mode = mode_;
  if (ctx.trace.active && !ctx.attempt_spans.empty()) {
    auto& span = ctx.attempt_spans.back();
    span.resume_mode = mode_;
    span.resumed_after = resumed_->reason;
    span.failed_at = resumed_->failed_at;
    span.resumed_at_token = resumed_->delivered_tokens;
  }
  if (auto* splice = dynamic_cast<stream::resume_splice*>(translator_.get());
      splice && s_.prefills(got.attempt))
    splice->prefilled(resumed_->delivered_tokens);
  return translator_.get();
}

bool resumption::continues(const upstream::answer& got) const {
  return got.head.status == 200 &&
         got.head.value_of(known_field::content_type).starts_with("text/event-stream") &&
         translator_ && translator_->upstream_dialect() == answers_in(plan_, got.attempt, s_.ctx);
}

std::optional<std::size_t> resumption::next_attempt(const upstream::answer& got) {
  auto& ctx = s_.ctx;
  if (resumed_)
    count(s_.suspended                                        ? "failed"
          : ctx.error && ctx.error->code == "resume_diverged" ? "diverged"
          : ctx.upstream_failed_midstream                     ? "failed"
                                                              : "completed");
  if (s_.suspended) {
    resumed_ = std::move(s_.suspended);
    --s_.resumes_left;
    ++ctx.resumes;
    if (ctx.resumed_at_token == 0) ctx.resumed_at_token = ctx.content_events;
    return got.attempt;
  }
  if (s_.abandoned) return got.attempt + (std::exchange(s_.retry_same_target, false) ? 0 : 1);
  return std::nullopt;
}

void resumption::failed() {
  if (resumed_) count("failed");
}

std::string_view resumption::mode_of(const upstream::answer& got) const {
  return s_.prefills(got.attempt) ? "prefill" : "restart";
}

void resumption::count(std::string_view result) {
  if (!resumed_) return;
  auto mode = mode_.empty() ? (s_.prefill ? "prefill" : "restart") : mode_;
  w_.metrics().resumes.add(
      {s_.ctx.route, std::string(mode), std::string(resumed_->reason), std::string(result)});
}

}  // namespace tokengate
