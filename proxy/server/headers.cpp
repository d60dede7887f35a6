#include "server/headers.hpp"

#include <algorithm>
#include <utility>

#include "http_token.hpp"

namespace tokengate {
namespace {

// Tokens of every Connection header, e.g. "keep-alive, x-foo"; `first` is
// the first of them (fields.find, looked up once per head, not per field:
// a tree search with a case-blind compare at every step). Beast keeps the
// fields of one name together (a repeat goes after the last of its name),
// so the others follow it.
bool named_by_connection(const http::fields& fields, http::fields::const_iterator first, std::string_view name) {
  for (auto it = first; it != fields.end() && it->name() == http::field::connection; ++it) {
    std::string_view list = it->value();
    while (!list.empty()) {
      auto comma = list.find(',');
      auto token = list.substr(0, comma);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
      if (same_name(token, name)) return true;
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return false;
}

// (Fields with a name Beast knows are compared by its code, which its
// parser found case-blind; the rest by name.)
bool is_credential(http::field code, std::string_view name) {
  if (code != http::field::unknown) return code == http::field::authorization;
  return same_name(name, "x-api-key") || same_name(name, "api-key");
}

}  // namespace

bool is_hop_by_hop(http::field code) {
  switch (code) {
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::proxy_authenticate:
    case http::field::proxy_authorization:
    case http::field::proxy_connection:
    case http::field::te:
    case http::field::trailer:
    case http::field::transfer_encoding:
    case http::field::upgrade:
      return true;
    default:
      return false;
  }
}
// (By length first: called for every field of every response head.)
bool is_hop_by_hop(std::string_view name) {
  switch (name.size()) {
    case 2:
      return same_name(name, "te");
    case 7:
      return same_name(name, "trailer") || same_name(name, "upgrade");
    case 10:
      return same_name(name, "connection") || same_name(name, "keep-alive");
    case 16:
      return same_name(name, "proxy-connection");
    case 17:
      return same_name(name, "transfer-encoding");
    case 18:
      return same_name(name, "proxy-authenticate");
    case 19:
      return same_name(name, "proxy-authorization");
    default:
      return false;
  }
}

void forward_request_headers(const http::fields& client, head_writer& upstream,
                             std::string_view upstream_host, std::string_view request_id,
                             const upstream_credentials& credentials) {
  bool version_forwarded = false;
  const auto connection = client.find(http::field::connection);
  for (const auto& f : client) {
    auto code = f.name();
    auto name = f.name_string();
    if (is_hop_by_hop(code) || named_by_connection(client, connection, name)) continue;
    if (code == http::field::host || code == http::field::content_length) continue;
    // We must read the stream to observe it, so we ask for it uncompressed.
    if (code == http::field::accept_encoding) continue;
    bool unknown = code == http::field::unknown;  // (the three names below are not Beast's)
    if (unknown && same_name(name, "x-request-id")) continue;
    if (credentials.how != upstream_credentials::style::none && is_credential(code, name)) continue;
    version_forwarded = version_forwarded || (unknown && same_name(name, "anthropic-version"));
    upstream.field(name, f.value());
  }
  upstream.field("Host", upstream_host);
  upstream.field("Accept-Encoding", "identity");
  upstream.field("x-request-id", request_id);
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
      break;
  }
}

void forward_response_headers(const upstream::response_head& upstream, head_writer& client,
                              std::string_view request_id, std::span<const named_value> added,
                              std::span<const std::string_view> replaced) {
  auto dropped = [&](std::string_view name) {
    if (is_hop_by_hop(name) || same_name(name, "content-length") || same_name(name, "x-request-id")) return true;
    auto same = [&](std::string_view other) { return same_name(name, other); };
    const auto options = upstream.named_by_connection();
    return std::any_of(options.begin(), options.end(), same) ||
           std::any_of(added.begin(), added.end(), [&](const named_value& a) { return same(a.first); }) ||
           std::any_of(replaced.begin(), replaced.end(), same);
  };
  // The kept lines follow each other in the upstream's head: each run of
  // them goes in one copy.
  std::string_view run;
  for (const auto& f : upstream.fields) {
    if (dropped(f.name)) {
      client.lines(std::exchange(run, {}));
      continue;
    }
    if (!run.empty() && run.data() + run.size() == f.line.data()) {
      run = std::string_view(run.data(), run.size() + f.line.size());
    } else {
      client.lines(run);
      run = f.line;
    }
  }
  client.lines(run);
  client.field("x-request-id", request_id);
  for (const auto& [name, value] : added) client.field(name, value);
}

}  // namespace tokengate
