// libFuzzer target: the request path up to the upstream. A request is parsed
// with the proxy's own limits (head bytes, header count, body bytes); what
// parses is put through the header forwarding and the policy, as a session
// does. Oracles: nothing crashes; no body beyond the limit is accepted; no
// hop-by-hop header and no client credential crosses to the upstream; the
// head written for the upstream parses.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/parser.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "config/config.hpp"
#include "fuzz_check.hpp"
#include "routing/policy.hpp"
#include "server/headers.hpp"



using namespace tokengate;

namespace {
const char* policy_yaml = R"(
listeners: [{name: main, address: 127.0.0.1, port: 0}]
upstreams:
  a: {base_url: "https://api.example.com/v1", kind: openai, api_key: secret-upstream-key}
routes:
  - models: ["*"]
    targets: [{upstream: a}]
    max_output_tokens: {default: 10, ceiling: 100, mode: clamp}
limits: {max_head_bytes: 4096, max_header_count: 20, max_body_bytes: 65536}
)";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto cfg = config::load_config_text(policy_yaml, "fuzz.yaml");
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(cfg->limits.max_head_bytes));
  parser.body_limit(cfg->limits.max_body_bytes);
  error_code ec;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  while (!input.empty() && !parser.is_done()) {
    auto used = parser.put(boost::asio::buffer(input.data(), input.size()), ec);
    if (ec == http::error::need_more) {
      ec = {};
      if (used == 0) break;
    }
    if (ec) return 0;
    input.remove_prefix(used);
  }
  if (!parser.is_done()) return 0;
  const auto& request = parser.get();
  check(request.body().size() <= cfg->limits.max_body_bytes);

  const auto& upstream = cfg->upstreams.at("a");
  head_writer writer("POST", "/v1/chat/completions", 0);
  upstream_credentials credentials{upstream_credentials::style::bearer, upstream.api_key};
  forward_request_headers(request, writer, "api.example.com", "req-1", credentials);
  // The head written for the upstream parses back whole (whatever the
  // client's fields held), and carries what the oracles below say.
  auto head = std::move(writer).finish();
  http::request_parser<http::empty_body> written;
  written.eager(false);
  written.put(boost::asio::buffer(head.data(), head.size()), ec);
  check(!ec && written.is_header_done());
  const auto& forwarded = written.get().base();
  for (const auto& field : forwarded) check(!is_hop_by_hop(field.name_string()));
  check(forwarded[http::field::authorization] == "Bearer secret-upstream-key");
  check(forwarded.count(http::field::authorization) == 1);

  auto key = routing::client_key_from(request[http::field::authorization], request["x-api-key"]);
  auto target = request.target();
  routing::apply_policy(*cfg, {std::string_view(target.data(), target.size()), request.body(), key});
  return 0;
}
