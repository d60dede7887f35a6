#include "upstream/target_url.hpp"

#include <boost/url/parse.hpp>

namespace tokengate::upstream {

std::optional<target_url> parse_target_url(std::string_view text) {
  auto parsed = boost::urls::parse_absolute_uri(text);
  if (!parsed) return std::nullopt;
  const auto& url = *parsed;
  target_url t;
  auto scheme = url.scheme();
  if (scheme == "https")
    t.tls = true;
  else if (scheme != "http")
    return std::nullopt;
  if (!url.has_authority() || url.encoded_host().empty()) return std::nullopt;
  t.host = std::string(url.encoded_host());
  if (t.host.size() > 2 && t.host.front() == '[') t.host = t.host.substr(1, t.host.size() - 2);
  t.port = url.has_port() ? std::string(url.port()) : (t.tls ? "443" : "80");
  t.host_header = std::string(url.encoded_host());
  if (url.has_port()) t.host_header += ":" + t.port;
  t.path_prefix = std::string(url.encoded_path());
  while (!t.path_prefix.empty() && t.path_prefix.back() == '/') t.path_prefix.pop_back();
  return t;
}

std::string target_url::upstream_path(std::string_view client_target) const {
  if (client_target.rfind("/v1/", 0) == 0 || client_target == "/v1") client_target.remove_prefix(3);
  std::string out = path_prefix;
  out.append(client_target);
  if (out.empty()) out = "/";
  return out;
}

}  // namespace tokengate::upstream
