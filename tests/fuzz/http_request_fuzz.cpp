// libFuzzer target: the request path up to the upstream, and the client's
// request head read by our parser and by Beast's, which read it before
// (http/request_head.hpp).
//
// The path: a request is parsed with the proxy's own limits (head bytes,
// header count, body bytes), its body taken by its length or its chunks as
// the session takes it; what parses is put through the header forwarding
// and the policy. Oracles: nothing crashes or reads past the input; no body
// beyond the limit is accepted; no hop-by-hop header and no client
// credential crosses to the upstream; the head written for the upstream
// parses.
//
// The comparison: a head we accept, Beast accepts too, with the same
// length, method, target, version, fields (each name's values in order,
// where no fold was blanked), framing and keep-alive; a head we wait on,
// Beast does not call complete; a head only Beast accepts is one we refuse
// on purpose (framing two ways, a coding other than chunked, more
// Connection options than we keep), and empty lines before the request line
// are ones only we skip.
#include <algorithm>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "fuzz_check.hpp"
#include "http/chunked_body.hpp"
#include "http/headers.hpp"
#include "http/request_head.hpp"
#include "routing/policy.hpp"
#include "same_head.hpp"

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

void compare_with_beast(const std::string& input) {
  std::string ours_text = input;  // (our parser blanks folds in place)
  request_head head;
  std::size_t used = 0;
  error_code ours_ec;
  auto progress = parse_request_head(ours_text, head, used, ours_ec);

  // Beast refuses empty lines before the request line; we skip them.
  std::size_t skipped = 0;
  while (input.compare(skipped, 2, "\r\n") == 0) skipped += 2;
  const std::string_view beast_input = std::string_view(input).substr(skipped);
  http::request_parser<http::empty_body> beast;
  beast.eager(false);
  beast.header_limit(64 * 1024);
  beast.body_limit(boost::none);
  error_code beast_ec;
  auto beast_used =
      beast.put(boost::asio::buffer(beast_input.data(), beast_input.size()), beast_ec);
  bool beast_done = !beast_ec && beast.is_header_done();

  if (progress == head_progress::need_more) {
    check(!beast_done);
    return;
  }
  if (progress == head_progress::failed) {
    if (beast_done) {
      // Only where we are stricter on purpose.
      check(ours_ec == http::error::bad_transfer_encoding ||
            ours_ec == http::error::bad_content_length || ours_ec == http::error::header_limit ||
            ours_ec == http::error::bad_value);
    }
    return;
  }

  const auto text = std::string_view(input).substr(0, used);
  const bool folded =
      text.find("\r\n ") != std::string_view::npos || text.find("\r\n\t") != std::string_view::npos;
  // Beast joins a folded value in a buffer of 4 KiB and refuses a longer
  // one (header_limit); we blank folds in place, whatever the length.
  if (!beast_done && folded && beast_ec == http::error::header_limit) return;
  check(beast_done);
  check(used == skipped + beast_used);
  check(head.bytes == std::string_view(ours_text).substr(0, used));
  const auto& message = beast.get();
  check(head.method == message.method());
  check(head.method_string == std::string_view(message.method_string()));
  check(head.target == std::string_view(message.target()));
  check(head.version == message.version());
  fuzz::check_same_head(head, beast, message, folded);
}

// The session's path: the head within the limits, then the body.
void through_the_proxy(std::string input) {
  static const auto cfg = config::load_config_text(policy_yaml, "fuzz.yaml");
  const auto& limits = cfg->limits;
  client_request request;
  std::size_t used = 0;
  error_code ec;
  std::span<char> text(input.data(), std::min(input.size(), limits.max_head_bytes));
  if (parse_request_head(text, request.head, used, ec, limits.max_header_count) !=
      head_progress::done)
    return;
  const auto& head = request.head;
  check(head.fields.size() <= limits.max_header_count);
  std::span<char> rest(input.data() + used, input.size() - used);
  if (head.chunked) {
    auto decoder = body_decoder::chunked();
    take_chunks(decoder, rest, request.body, limits.max_body_bytes, ec);
    if (ec || !decoder.done()) return;
  } else {
    auto length = head.content_length.value_or(0);
    if (length > limits.max_body_bytes || length > rest.size()) return;
    request.body.assign(rest.data(), rest.data() + length);
  }
  check(request.body.size() <= limits.max_body_bytes);

  const auto& upstream = cfg->upstreams.at("a");
  head_writer writer("POST", "/v1/chat/completions", 0);
  upstream_credentials credentials{upstream_credentials::style::bearer, upstream.api_key};
  forward_request_headers(head, writer, "api.example.com", "req-1", credentials);
  // The head written for the upstream parses back whole (whatever the
  // client's fields held), and carries what the oracles below say.
  auto written_text = std::move(writer).finish();
  http::request_parser<http::empty_body> written;
  written.eager(false);
  written.put(boost::asio::buffer(written_text.data(), written_text.size()), ec);
  check(!ec && written.is_header_done());
  const auto& forwarded = written.get().base();
  for (const auto& field : forwarded) check(!is_hop_by_hop(field.name_string()));
  // (A Connection option may name a field the proxy writes itself.)
  const auto proxys = {"host", "accept-encoding", "x-request-id", "authorization"};
  for (auto option : head.named_by_connection())
    if (std::none_of(proxys.begin(), proxys.end(),
                     [&](const char* n) { return fuzz::lower(option) == n; }))
      check(forwarded.find(option) == forwarded.end());
  check(forwarded[http::field::authorization] == "Bearer secret-upstream-key");
  check(forwarded.count(http::field::authorization) == 1);
  check(forwarded.count("x-api-key") == 0);

  // The fields noted as the head was parsed are what a walk over the fields
  // finds (the session reads them the noted way).
  const std::pair<known_field, const char*> known[] = {
      {known_field::authorization, "authorization"},
      {known_field::x_api_key, "x-api-key"},
      {known_field::x_request_id, "x-request-id"},
      {known_field::expect, "expect"},
      {known_field::content_type, "content-type"}};
  for (const auto& [field, name] : known) check(head.value_of(field) == head.value_of(name));
  auto key = routing::client_key_from(head.value_of(known_field::authorization),
                                      head.value_of(known_field::x_api_key));
  routing::apply_policy(*cfg, {head.target, body_text(request), key});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  compare_with_beast(input);
  through_the_proxy(input);
  return 0;
}
