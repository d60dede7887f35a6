#include "metrics/counters.hpp"

#include "metrics/prometheus_text.hpp"

namespace tokengate::metrics {

void shard::count_status(unsigned status) {
  if (status >= 500)
    downstream_rq_5xx.add();
  else if (status >= 400)
    downstream_rq_4xx.add();
  else if (status >= 300)
    downstream_rq_3xx.add();
  else
    downstream_rq_2xx.add();
}

void error_counts::add(std::string_view side, std::string_view code) {
  std::lock_guard lock(mutex_);
  auto key = std::make_pair(std::string(side), std::string(code));
  ++counts_[std::move(key)];
}

namespace {

// One labelled family: its shards' counts merged, then written.
template <std::size_t N>
void write_labelled(prometheus_text& out, const std::vector<const shard*>& shards,
                    label_counts<N> shard::*member, const char* name, const char* help,
                    const std::array<const char*, N>& names) {
  std::map<std::array<std::string, N>, std::uint64_t> merged;
  for (auto* s : shards)
    (s->*member).each([&](const std::array<std::string, N>& k, std::uint64_t n) {
      merged[k] += n;
    });
  out.family(name, metric_type::counter, help);
  for (const auto& [k, n] : merged) {
    labels set;
    for (std::size_t i = 0; i < N; ++i) set.add(names[i], k[i]);
    out.sample(set, n);
  }
}

struct family {
  const char* name;
  metric_type type;
  const char* help;
  counter shard::*member;
};

// One table, plain data: name (with side and unit), type, help.
const family families[] = {
    {"tokengate_downstream_cx_total", metric_type::counter, "Client connections accepted.",
     &shard::downstream_cx_total},
    {"tokengate_downstream_cx_active", metric_type::gauge, "Client connections open now.",
     &shard::downstream_cx_active},
    {"tokengate_downstream_cx_refused_per_client_total", metric_type::counter,
     "Connections over limits.max_connections_per_client, answered 429 and closed.",
     &shard::downstream_cx_refused_per_client},
    {"tokengate_downstream_cx_accept_paused_total", metric_type::counter,
     "Times a worker stopped accepting at limits.max_connections.",
     &shard::downstream_cx_accept_paused},
    {"tokengate_downstream_tls_handshakes_total", metric_type::counter,
     "TLS handshakes completed with clients.", &shard::downstream_tls_handshakes},
    {"tokengate_downstream_tls_resumed_total", metric_type::counter,
     "Client TLS handshakes that resumed a session from a ticket (no certificate sent).",
     &shard::downstream_tls_resumed},
    {"tokengate_downstream_rq_total", metric_type::counter, "Client requests received.",
     &shard::downstream_rq_total},
    {"tokengate_downstream_rq_active", metric_type::gauge, "Client requests in progress.",
     &shard::downstream_rq_active},
    {"tokengate_downstream_rq_paced_total", metric_type::counter,
     "Requests whose set-up waited for a later turn of the event loop (a burst of new requests), "
     "so that open streams' events went first.",
     &shard::downstream_rq_paced},
    {"tokengate_downstream_rq_client_cancelled_total", metric_type::counter,
     "Requests the client abandoned before the end.", &shard::downstream_rq_client_cancelled},
    {"tokengate_downstream_rq_stream_failed_total", metric_type::counter,
     "Streams cut by an upstream failure after the response began.",
     &shard::downstream_rq_stream_failed},
    {"tokengate_upstream_cx_connect_fail_total", metric_type::counter,
     "Failed connection attempts to upstreams.", &shard::upstream_cx_connect_fail},
    {"tokengate_upstream_cx_reused_total", metric_type::counter,
     "Requests sent on a pooled keep-alive connection.", &shard::upstream_cx_reused},
    {"tokengate_upstream_tls_handshakes_total", metric_type::counter,
     "TLS handshakes completed with upstreams.", &shard::upstream_tls_handshakes},
    {"tokengate_upstream_tls_resumed_total", metric_type::counter,
     "Upstream TLS handshakes that resumed the pool's last session (no certificate to verify).",
     &shard::upstream_tls_resumed},
    {"tokengate_upstream_rq_fallback_total", metric_type::counter,
     "Attempts on a further target after a failure (fallback).", &shard::upstream_rq_fallback},
    {"tokengate_upstream_rq_forwarded_early_total", metric_type::counter,
     "Long request bodies forwarded to the upstream while they arrived.",
     &shard::upstream_rq_forwarded_early},
    {"tokengate_upstream_rq_early_abandoned_total", metric_type::counter,
     "Bodies forwarded early whose whole body changed the plan: that upstream connection was "
     "closed before the last byte, and the request sent again.",
     &shard::upstream_rq_early_abandoned},
    {"tokengate_upstream_ejections_total", metric_type::counter,
     "Times a worker ejected an upstream after consecutive failures.", &shard::upstream_ejections},
    {"tokengate_limit_injected_total", metric_type::counter,
     "Requests given the default output-token limit.", &shard::limit_injected},
    {"tokengate_limit_clamped_total", metric_type::counter,
     "Requests whose output-token limit was lowered to the ceiling.", &shard::limit_clamped},
    {"tokengate_limit_rejected_total", metric_type::counter,
     "Requests refused for asking more output tokens than allowed.", &shard::limit_rejected},
    {"tokengate_limit_enforced_total", metric_type::counter,
     "Streams cut by the proxy because the upstream overran the limit.", &shard::limit_enforced},
    {"tokengate_upstream_rq_timeout_total", metric_type::counter,
     "Upstream requests that timed out.", &shard::upstream_rq_timeout},
    {"tokengate_streams_active", metric_type::gauge, "Event streams being relayed now.",
     &shard::stream_active},
    {"tokengate_upstream_cx_idle", metric_type::gauge,
     "Keep-alive upstream connections waiting in the pools.", &shard::upstream_cx_idle},
    {"tokengate_stream_events_total", metric_type::counter,
     "Server-sent events relayed to clients.", &shard::stream_events_total},
    {"tokengate_downstream_sent_bytes_total", metric_type::counter,
     "Response bytes written to clients.", &shard::downstream_bytes_sent},
    {"tokengate_request_body_buffers_kept_bytes", metric_type::gauge,
     "Memory kept in the buffers of long request bodies for the next ones (at most 32 MiB a "
     "worker, each buffer freed after 10 s unused).",
     &shard::request_body_buffers_kept_bytes},
};

std::uint64_t sum(const std::vector<const shard*>& shards, counter shard::*member) {
  std::uint64_t total = 0;
  for (auto* s : shards) total += (s->*member).get();
  return total;
}

}  // namespace

std::string render_prometheus(const std::vector<const shard*>& shards) {
  prometheus_text out;
  for (const auto& f : families) {
    out.family(f.name, f.type, f.help);
    out.sample(sum(shards, f.member));
  }
  out.family("tokengate_downstream_rq_by_class_total", metric_type::counter,
             "Client requests by response status class.");
  std::pair<const char*, counter shard::*> classes[] = {{"2xx", &shard::downstream_rq_2xx},
                                                        {"3xx", &shard::downstream_rq_3xx},
                                                        {"4xx", &shard::downstream_rq_4xx},
                                                        {"5xx", &shard::downstream_rq_5xx}};
  for (auto& [label, member] : classes) out.sample({{"status_class", label}}, sum(shards, member));
  std::map<std::pair<std::string, std::string>, std::uint64_t> errors;
  for (auto* s : shards)
    s->errors.each([&](const std::string& side, const std::string& code, std::uint64_t n) {
      errors[{side, code}] += n;
    });
  out.family("tokengate_request_errors_total", metric_type::counter,
             "Requests that ended in an error, by who was at fault (client, policy, upstream, "
             "internal) and the error's code.");
  for (const auto& [key, n] : errors) out.sample({{"side", key.first}, {"code", key.second}}, n);
  write_labelled(out, shards, &shard::retries, "tokengate_upstream_retries_total",
                 "Attempts sent again to the same upstream before anything reached the client, "
                 "by route, upstream and what failed (rate_limited, server_error, reset).",
                 {"route", "upstream", "reason"});
  write_labelled(out, shards, &shard::resumes, "tokengate_stream_resumes_total",
                 "Streams whose upstream failed mid-answer, continued from another attempt, by "
                 "route, mode, what failed (reset, timeout, error_event, unfinished) and how the "
                 "continuation ended (completed, diverged, failed).",
                 {"route", "mode", "reason", "result"});
  return out.take();
}

}  // namespace tokengate::metrics
