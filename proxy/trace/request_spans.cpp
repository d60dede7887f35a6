#include "trace/request_spans.hpp"

namespace tokengate::trace {
namespace {

using clock = std::chrono::steady_clock;

// Steady time points as Unix nanoseconds, by the two clocks' offset now.
class unix_time {
 public:
  unix_time()
      : offset_(
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::system_clock::now().time_since_epoch()) -
            std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch())) {
  }
  std::uint64_t ns(clock::time_point t) const {
    return static_cast<std::uint64_t>(
        (std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()) + offset_)
            .count());
  }

 private:
  std::chrono::nanoseconds offset_;
};

bool set(clock::time_point t) { return t != clock::time_point{}; }

std::string operation_of(dialect d) {
  switch (d) {
    case dialect::openai_completions:
      return "text_completion";
    case dialect::other:
      return "embeddings";
    default:
      return "chat";
  }
}

// gen_ai.provider.name: Anthropic's API, or OpenAI's (and the engines that speak it).
std::string provider_of(const request_context& ctx, const config::config& cfg) {
  auto u = cfg.upstreams.find(ctx.upstream);
  if (u != cfg.upstreams.end() && u->second.kind == config::provider_kind::anthropic)
    return "anthropic";
  if (u != cfg.upstreams.end() && u->second.kind == config::provider_kind::openai) return "openai";
  return ctx.dialect == dialect::anthropic_messages ? "anthropic" : "openai";
}

void add_gen_ai(std::vector<attribute>& a, const request_context& ctx, const std::string& provider,
                const std::string& model) {
  a.push_back({"gen_ai.operation.name", operation_of(ctx.dialect)});
  a.push_back({"gen_ai.provider.name", provider});
  if (!model.empty()) a.push_back({"gen_ai.request.model", model});
  if (ctx.output_limit) a.push_back({"gen_ai.request.max_tokens", std::int64_t{*ctx.output_limit}});
}

std::vector<attribute> server_attributes(const request_context& ctx, const std::string& provider) {
  std::vector<attribute> a;
  add_gen_ai(a, ctx, provider, ctx.model);
  if (!ctx.attempt_spans.empty() && !ctx.attempt_spans.back().model.empty())
    a.push_back({"gen_ai.response.model", ctx.attempt_spans.back().model});
  if (ctx.input_tokens) a.push_back({"gen_ai.usage.input_tokens", std::int64_t{*ctx.input_tokens}});
  if (ctx.output_tokens)
    a.push_back({"gen_ai.usage.output_tokens", std::int64_t{*ctx.output_tokens}});
  if (!ctx.finish_reason.empty())
    a.push_back({"gen_ai.response.finish_reasons", std::vector<std::string>{ctx.finish_reason}});
  a.push_back({"http.request.method", ctx.method});
  a.push_back({"url.path", ctx.path});
  if (ctx.status) a.push_back({"http.response.status_code", std::int64_t{ctx.status}});
  a.push_back({"tokengate.request_id", ctx.request_id});
  a.push_back({"tokengate.route", ctx.route});
  if (!ctx.upstream.empty()) a.push_back({"tokengate.upstream", ctx.upstream});
  a.push_back({"tokengate.attempts", std::int64_t{ctx.attempts}});
  a.push_back({"tokengate.streamed", ctx.streamed});
  a.push_back({"tokengate.limit_clamped", ctx.limit_clamped});
  a.push_back({"tokengate.limit_cut", ctx.limit_enforced});
  a.push_back({"tokengate.client_cancelled", ctx.client_gone});
  if (!ctx.cache.empty()) a.push_back({"tokengate.cache", std::string(ctx.cache)});
  if (set(ctx.admitted) && set(ctx.request_read) && ctx.admitted >= ctx.request_read)
    a.push_back(
        {"tokengate.queue_wait_ms",
         std::chrono::duration<double, std::milli>(ctx.admitted - ctx.request_read).count()});
  if (ctx.fleet_predicted_ms >= 0) {  // balance: fastest's choice, and why
    a.push_back({"tokengate.fleet.predicted_ttft_ms", ctx.fleet_predicted_ms});
    a.push_back({"tokengate.fleet.matched_tokens", std::int64_t{ctx.fleet_matched_tokens}});
    a.push_back({"tokengate.fleet.reason", std::string(ctx.fleet_reason)});
  }
  if (ctx.error) a.push_back({"error.type", std::string(ctx.error->code)});
  return a;
}

// An error is the upstream's or ours (5xx, a stream that failed); a
// client's mistake or its leaving leaves the status unset, as the HTTP
// conventions say for a server span.
void set_status(span& s, const request_context& ctx) {
  if (ctx.status >= 500 || ctx.upstream_failed_midstream) {
    s.status = span_status::error;
    if (ctx.error) s.status_message = ctx.error->message;
  }
}

span_event retry_event(const attempt_span& failed, const attempt_span& next, const unix_time& t) {
  span_event e{"tokengate.retry", t.ns(set(failed.end) ? failed.end : next.start), {}};
  e.attributes.push_back({"tokengate.upstream", failed.upstream});
  if (failed.status)
    e.attributes.push_back({"http.response.status_code", std::int64_t{failed.status}});
  if (!failed.error_code.empty())
    e.attributes.push_back({"error.type", std::string(failed.error_code)});
  e.attributes.push_back({"tokengate.next_upstream", next.upstream});
  return e;
}

// An event per attempt after the first: a retry (the attempt before
// failed before any content) or a resume (its stream failed mid-answer).
void add_retry_and_resume_events(span& s, const request_context& ctx, const unix_time& t) {
  for (std::size_t i = 1; i < ctx.attempt_spans.size(); ++i) {
    const auto& before = ctx.attempt_spans[i - 1];
    const auto& a = ctx.attempt_spans[i];
    if (!a.resume_mode.empty())
      s.events.push_back({"tokengate.resume",
                          t.ns(a.failed_at),
                          {{"tokengate.resume.mode", std::string(a.resume_mode)},
                           {"tokengate.resume.reason", std::string(a.resumed_after)},
                           {"tokengate.resume.at_token", std::int64_t(a.resumed_at_token)},
                           {"tokengate.upstream", a.upstream}}});
    else
      s.events.push_back(retry_event(before, a, t));
  }
}

span server_span(const request_context& ctx, const std::string& provider, const unix_time& t) {
  span s;
  s.trace = ctx.trace.trace;
  s.id = ctx.trace.span;
  s.parent = ctx.trace.parent;
  s.name = operation_of(ctx.dialect) + (ctx.model.empty() ? "" : " " + ctx.model);
  s.kind = span_kind::server;
  s.start_ns = t.ns(ctx.received);
  s.end_ns = t.ns(set(ctx.finished) ? ctx.finished : clock::now());
  s.attributes = server_attributes(ctx, provider);
  // Measured as the TTFT metric is: from the body read to the first
  // content's write to the client.
  if (set(ctx.first_token_written) && set(ctx.request_read))
    s.events.push_back({"gen_ai.first_token",
                        t.ns(ctx.first_token_written),
                        {{"tokengate.ttft_ms", std::chrono::duration<double, std::milli>(
                                                   ctx.first_token_written - ctx.request_read)
                                                   .count()}}});
  add_retry_and_resume_events(s, ctx, t);
  if (ctx.limit_enforced && ctx.output_limit)
    s.events.push_back({"tokengate.limit_cut",
                        t.ns(set(ctx.last_token) ? ctx.last_token : ctx.finished),
                        {{"gen_ai.request.max_tokens", std::int64_t{*ctx.output_limit}}}});
  set_status(s, ctx);
  return s;
}

span attempt_span_of(const request_context& ctx, const attempt_span& a, bool answered,
                     const std::string& provider, const unix_time& t) {
  span s;
  s.trace = ctx.trace.trace;
  s.id = a.id;
  s.parent = ctx.trace.span;
  s.name = operation_of(ctx.dialect) + (a.model.empty() ? "" : " " + a.model);
  s.kind = span_kind::client;
  s.start_ns = t.ns(a.start);
  // The answering attempt lasts as long as its stream.
  s.end_ns = t.ns(answered && set(ctx.finished) ? ctx.finished : set(a.end) ? a.end : a.start);
  add_gen_ai(s.attributes, ctx, provider, a.model.empty() ? ctx.model : a.model);
  s.attributes.push_back({"server.address", a.server_address});
  s.attributes.push_back({"tokengate.upstream", a.upstream});
  if (a.status) s.attributes.push_back({"http.response.status_code", std::int64_t{a.status}});
  if (!a.error_code.empty()) {
    s.attributes.push_back({"error.type", std::string(a.error_code)});
    s.status = span_status::error;
  } else if (answered && ctx.upstream_failed_midstream) {
    s.status = span_status::error;
  }
  return s;
}

}  // namespace

std::vector<span> spans_for(const request_context& ctx, const config::config& cfg) {
  unix_time t;
  auto provider = provider_of(ctx, cfg);
  std::vector<span> out;
  out.reserve(1 + ctx.attempt_spans.size());
  out.push_back(server_span(ctx, provider, t));
  for (std::size_t i = 0; i < ctx.attempt_spans.size(); ++i) {
    const auto& a = ctx.attempt_spans[i];
    bool answered = i + 1 == ctx.attempt_spans.size() && a.error_code.empty();
    out.push_back(attempt_span_of(ctx, a, answered, provider, t));
  }
  return out;
}

}  // namespace tokengate::trace
