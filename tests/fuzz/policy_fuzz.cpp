// libFuzzer target: the one-pass JSON scan and the policy rewrite.
// Oracles: the scanner accepts exactly what Boost.JSON accepts (same depth
// bound, strict UTF-8); whenever the policy accepts a body, the body it
// sends to each target is valid JSON whose model is the target's and whose
// limit is the one decided.
#include <boost/json/error.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "config/config.hpp"
#include "fuzz_check.hpp"
#include "routing/json_scan.hpp"
#include "routing/policy.hpp"



using namespace tokengate;

namespace {

const char* policy_yaml = R"(
listeners: [{name: main, address: 127.0.0.1, port: 0}]
upstreams:
  a: {base_url: "http://127.0.0.1:1/v1", kind: openai, limit_field: max_completion_tokens}
  b: {base_url: "http://127.0.0.1:2/v1", kind: anthropic}
  c: {base_url: "http://127.0.0.1:3/v1", kind: openai}
routes:
  - name: clamp
    models: ["m*", "x"]
    targets: [{upstream: a, model: renamed}, {upstream: c}]
    max_output_tokens: {default: 100, ceiling: 1000, mode: clamp}
  - name: reject
    models: ["r?"]
    targets: [{upstream: b}]
    max_output_tokens: {ceiling: 50, mode: reject}
    max_prompt_bytes: 100000
)";


}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto cfg = config::load_config_text(policy_yaml, "fuzz.yaml");
  std::string_view body(reinterpret_cast<const char*>(data), size);

  routing::scan_error scan_err;
  auto scanned = routing::scan_object(body, scan_err, 64);
  boost::json::parse_options options;
  options.max_depth = 64;
  boost::system::error_code ec;
  auto reference = boost::json::parse(body, ec, {}, options);
  // JSON's grammar allows 1e400; Boost.JSON refuses numbers beyond a double.
  // The proxy passes such numbers through untouched: only the oracle differs.
  bool out_of_range_number = ec == boost::json::error::exponent_overflow;
  // The scanner only accepts objects; Boost.JSON accepts any value.
  if (out_of_range_number) {
    if (scanned) routing::apply_policy(*cfg, {"/v1/chat/completions", body, ""});
    return 0;
  }
  if (scanned) check(!ec && reference.is_object());
  else if (!ec && reference.is_object()) check(false);

  for (std::string_view path : {"/v1/chat/completions", "/v1/messages", "/v1/responses"}) {
    auto result = routing::apply_policy(*cfg, {path, body, ""});
    auto* routed = std::get_if<routing::routed_request>(&result);
    if (!routed) continue;
    check(scanned.has_value());
    for (const auto& target : routed->route->targets) {
      const auto& upstream = cfg->upstreams.at(target.upstream);
      for (bool ask_usage : {false, true}) {
        auto sent = routing::body_for_target(body, path, *routed, target, upstream, ask_usage);
        auto parsed = boost::json::parse(sent, ec, {}, options);
        check(!ec && parsed.is_object());
        const auto& object = parsed.as_object();
        const auto* model = object.if_contains("model");
        check(model && model->is_string());
        check(model->as_string() == (target.model.empty() ? routed->model : target.model));
      }
    }
  }
  return 0;
}
