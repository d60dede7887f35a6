#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokengate::upstream {

// An upstream base URL split into what a connection needs.
// "https://api.openai.com/v1" → tls, host api.openai.com, port 443, prefix /v1.
struct target_url {
  bool tls = false;
  std::string host;
  std::string port;         // as a service string for the resolver
  std::string host_header;  // host[:port], port only when not the default
  std::string path_prefix;  // without a trailing slash; may be empty

  // The upstream path for a client path: the client's "/v1" is the base
  // URL's prefix, so /v1/chat/completions → prefix + /chat/completions.
  std::string upstream_path(std::string_view client_target) const;
};

std::optional<target_url> parse_target_url(std::string_view url);

}  // namespace tokengate::upstream
