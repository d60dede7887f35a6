// libFuzzer target: the one-pass JSON scan and the policy rewrite.
// Oracles: the scanner accepts exactly what Boost.JSON accepts (same depth
// bound, strict UTF-8); whenever the policy accepts a body, the body it
// sends to each target is valid JSON whose model is the target's and whose
// limit is the one decided. And for a body cut anywhere (a long body still
// arriving, server/early_forward.cpp): the members whose comma has arrived
// are found, all of them, at the offsets they have in the whole body; and
// when no member after them is one the policy reads, the decision made on
// them is the whole body's, and the body sent with its edits is, as JSON,
// the one the whole body's plan sends.
#include <boost/json/error.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
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

bool same_member(const routing::json_member& a, const routing::json_member& b) {
  return a.key == b.key && a.begin == b.begin && a.end == b.end &&
         a.member_begin == b.member_begin && a.type == b.type;
}

// The body cut at `cut`, as early forwarding sees it.
void check_cut(const config::config& cfg, std::string_view body,
               const std::optional<routing::scanned_object>& whole, std::size_t cut) {
  auto end = routing::whole_members_end(body.substr(0, cut));
  std::size_t seen = 0;
  std::string members;
  if (end != std::string_view::npos) {
    check(end < cut && body[end] == ',');
    members = std::string(body.substr(0, end)) + "}";
    routing::scan_error err;
    auto start = routing::scan_object(members, err, 64);
    check(start && !start->members.empty());
    seen = start->members.size();
    if (whole) {
      check(seen < whole->members.size());
      for (std::size_t i = 0; i < seen; ++i)
        check(same_member(start->members[i], whole->members[i]));
    }
  }
  if (!whole) return;
  // None missed: the next member's comma has not arrived.
  if (seen < whole->members.size()) {
    auto after = whole->members[seen].end;
    while (after < body.size() &&
           std::string_view(" \t\r\n").find(body[after]) != std::string_view::npos)
      ++after;
    check(after >= cut || body[after] != ',');
  }
  if (end == std::string_view::npos) return;
  for (std::size_t i = seen; i < whole->members.size(); ++i)
    if (routing::policy_reads(whole->members[i].key)) return;  // the whole body decides again
  for (std::string_view path : {"/v1/chat/completions", "/v1/messages"}) {
    auto early = routing::apply_policy(cfg, {path, members, "", body.size()});
    auto full = routing::apply_policy(cfg, {path, body, ""});
    auto* e = std::get_if<routing::routed_request>(&early);
    auto* f = std::get_if<routing::routed_request>(&full);
    check(!e || f);  // (the whole body may still be refused: invalid after the cut)
    if (!e) continue;
    check(e->route == f->route && e->model == f->model && e->output_limit == f->output_limit &&
          e->stream == f->stream &&
          routing::usage_needed(*e, path) == routing::usage_needed(*f, path));
    for (const auto& target : f->route->targets) {
      const auto& upstream = cfg.upstreams.at(target.upstream);
      auto usage = routing::usage_needed(*f, path);
      auto sent_early = routing::apply_splices(
          body, routing::edits_for_target(members, path, *e, target, upstream, usage));
      auto sent_whole = routing::body_for_target(body, path, *f, target, upstream, usage);
      boost::system::error_code ec1, ec2;
      auto a = boost::json::parse(sent_early, ec1);
      auto b = boost::json::parse(sent_whole, ec2);
      check(!ec1 && !ec2);
      // (Boost.JSON reads 0e309 as NaN, which equals nothing, itself included.)
      if (b == b) check(a == b);
    }
  }
}

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
  if (scanned)
    check(!ec && reference.is_object());
  else if (!ec && reference.is_object())
    check(false);

  // Cut at a few places, and on both sides of the comma after each of the
  // first members (where the next member's arrival begins).
  for (std::size_t k = 1; k <= 8; ++k) check_cut(*cfg, body, scanned, size * k / 9);
  if (scanned)
    for (std::size_t i = 0; i + 1 < scanned->members.size() && i < 16; ++i) {
      auto comma = body.find(',', scanned->members[i].end);
      check_cut(*cfg, body, scanned, comma);
      check_cut(*cfg, body, scanned, comma + 1);
    }

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
