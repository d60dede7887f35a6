#include "http/headers.hpp"

#include <algorithm>
#include <utility>

#include "http/token.hpp"

namespace tokengate {
namespace {

// A head's fields onto `to` as the lines the sender wrote, but for those
// `dropped` names: the kept lines follow each other in the head, and each
// run of them goes in one copy.
template <typename Dropped>
void copy_kept_lines(const message_head& from, head_writer& to, Dropped dropped) {
  std::string_view run;
  for (const auto& f : from.fields) {
    if (dropped(f.name)) {
      to.lines(std::exchange(run, {}));
      continue;
    }
    if (!run.empty() && run.data() + run.size() == f.line.data()) {
      run = std::string_view(run.data(), run.size() + f.line.size());
    } else {
      to.lines(run);
      run = f.line;
    }
  }
  to.lines(run);
}

bool named_in(std::span<const std::string_view> names, std::string_view name) {
  return std::any_of(names.begin(), names.end(),
                     [&](std::string_view n) { return same_name(n, name); });
}

bool is_credential(std::string_view name) {
  return is_named(name, "authorization") || is_named(name, "x-api-key") ||
         is_named(name, "api-key");
}

}  // namespace

// (By length first: called for every field of every head that crosses.)
bool is_hop_by_hop(std::string_view name) {
  switch (name.size()) {
    case 2:
      return is_named(name, "te");
    case 7:
      return is_named(name, "trailer") || is_named(name, "upgrade");
    case 10:
      return is_named(name, "connection") || is_named(name, "keep-alive");
    case 16:
      return is_named(name, "proxy-connection");
    case 17:
      return is_named(name, "transfer-encoding");
    case 18:
      return is_named(name, "proxy-authenticate");
    case 19:
      return is_named(name, "proxy-authorization");
    default:
      return false;
  }
}

void forward_request_headers(const request_head& client, head_writer& upstream,
                             std::string_view upstream_host, std::string_view request_id,
                             const upstream_credentials& credentials, std::string_view traceparent,
                             std::string_view tracestate) {
  const bool replace_credentials = credentials.how != upstream_credentials::style::none;
  bool version_forwarded = false;
  copy_kept_lines(client, upstream, [&](std::string_view name) {
    if (is_hop_by_hop(name) || named_in(client.named_by_connection(), name)) return true;
    // Ours to write: the upstream's host, the body's length, the request id.
    // And we must read the stream to observe it, so we ask for it
    // uncompressed. An Expect: 100-continue the session has answered (the
    // body goes whole): forwarded, an upstream's 100 would be read as its
    // answer.
    if (is_named(name, "host") || is_named(name, "content-length") ||
        is_named(name, "accept-encoding") || is_named(name, "x-request-id") ||
        is_named(name, "expect"))
      return true;
    if (replace_credentials && is_credential(name)) return true;
    if (!traceparent.empty() && (is_named(name, "traceparent") || is_named(name, "tracestate")))
      return true;
    version_forwarded = version_forwarded || is_named(name, "anthropic-version");
    return false;
  });
  upstream.field("Host", upstream_host);
  upstream.field("Accept-Encoding", "identity");
  upstream.field("x-request-id", request_id);
  if (!traceparent.empty()) upstream.field("traceparent", traceparent);
  if (!traceparent.empty() && !tracestate.empty()) upstream.field("tracestate", tracestate);
  switch (credentials.how) {
    case upstream_credentials::style::bearer: {
      std::string bearer = "Bearer ";
      upstream.field("Authorization", bearer.append(credentials.key));
      break;
    }
    case upstream_credentials::style::x_api_key:
      upstream.field("x-api-key", credentials.key);
      if (!version_forwarded) upstream.field("anthropic-version", credentials.anthropic_version);
      break;
    case upstream_credentials::style::none:
      if (credentials.anthropic_version_needed && !version_forwarded)
        upstream.field("anthropic-version", credentials.anthropic_version);
      break;
  }
}

void forward_response_headers(const response_head& upstream, head_writer& client,
                              std::string_view request_id, std::span<const named_value> added,
                              std::span<const std::string_view> replaced) {
  copy_kept_lines(upstream, client, [&](std::string_view name) {
    if (is_hop_by_hop(name) || is_named(name, "content-length") || is_named(name, "x-request-id"))
      return true;
    return named_in(upstream.named_by_connection(), name) || named_in(replaced, name) ||
           std::any_of(added.begin(), added.end(),
                       [&](const named_value& a) { return same_name(name, a.first); });
  });
  client.field("x-request-id", request_id);
  for (const auto& [name, value] : added) client.field(name, value);
}

}  // namespace tokengate
