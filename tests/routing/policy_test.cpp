#include "routing/policy.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "config/config.hpp"

namespace tokengate::routing {
namespace {

namespace json = boost::json;

std::shared_ptr<const config::config> policy(const std::string& extra) {
  return config::load_config_text(
      "listeners: [{name: main, port: 0}]\n"
      "upstreams:\n"
      "  openai: {base_url: 'https://api.openai.com/v1'}\n"
      "  llama: {base_url: 'http://127.0.0.1:8080/v1', limit_field: max_tokens}\n"
      "  reasoning: {base_url: 'https://api.openai.com/v1', limit_field: max_completion_tokens}\n"
      "routes:\n"
      "  - {name: exact, models: [gpt-4o-mini], targets: [{upstream: openai}],\n"
      "     max_output_tokens: {default: 100, ceiling: 1000, mode: clamp}}\n"
      "  - {name: alias, models: [fast], targets: [{upstream: llama, model: llama-3-8b}],\n"
      "     max_output_tokens: {ceiling: 50, mode: reject}}\n"
      "  - {name: glob, models: ['claude-*', 'o?-mini'], targets: [{upstream: reasoning}], "
      "max_prompt_bytes: 300}\n" +
          extra,
      "policy.yaml");
}

std::variant<routed_request, request_error> run(const config::config& c, std::string_view path,
                                                std::string_view body, std::string_view key = "") {
  return apply_policy(c, {path, body, key});
}

const routed_request& ok(const std::variant<routed_request, request_error>& v) {
  if (auto* e = std::get_if<request_error>(&v)) ADD_FAILURE() << e->status << " " << e->message;
  return std::get<routed_request>(v);
}

request_error err(const std::variant<routed_request, request_error>& v) {
  EXPECT_TRUE(std::holds_alternative<request_error>(v));
  return std::holds_alternative<request_error>(v) ? std::get<request_error>(v) : request_error{};
}

TEST(Glob, MatchesLikeAShell) {
  EXPECT_TRUE(glob_match("gpt-4o*", "gpt-4o-mini"));
  EXPECT_TRUE(glob_match("gpt-4o*", "gpt-4o"));
  EXPECT_FALSE(glob_match("gpt-4o*", "gpt-4"));
  EXPECT_TRUE(glob_match("o?-mini", "o3-mini"));
  EXPECT_FALSE(glob_match("o?-mini", "o10-mini"));
  EXPECT_TRUE(glob_match("*-*-*", "a-b-c"));
  EXPECT_TRUE(glob_match("exact", "exact"));
  EXPECT_FALSE(glob_match("exact", "exactly"));
  EXPECT_FALSE(glob_match(std::string(30, '*') + "b", std::string(5000, 'a')));  // no blow-up
}

TEST(Policy, RoutesByExactAliasAndGlob) {
  auto c = policy("");
  EXPECT_EQ(ok(run(*c, "/v1/chat/completions", R"({"model":"gpt-4o-mini"})")).route->name, "exact");
  EXPECT_EQ(ok(run(*c, "/v1/chat/completions", R"({"model":"fast"})")).route->name, "alias");
  EXPECT_EQ(
      ok(run(*c, "/v1/messages", R"({"model":"claude-3-5-haiku","max_tokens":10})")).route->name,
      "glob");
  EXPECT_EQ(ok(run(*c, "/v1/chat/completions", R"({"model":"o3-mini"})")).route->name, "glob");
  auto e = err(run(*c, "/v1/chat/completions", R"({"model":"gpt-5"})"));
  EXPECT_EQ(e.status, 404u);
  EXPECT_NE(e.message.find("'gpt-5'"), std::string::npos);
}

TEST(Policy, BadBodiesAre400) {
  auto c = policy("");
  for (auto [body, code] : std::vector<std::pair<std::string, std::string>>{
           {"{", "invalid_json"},
           {"[]", "invalid_body"},
           {R"({"messages":[]})", "missing_model"},
           {R"({"model":7})", "invalid_model"},
           {R"({"model":"fast","stream":"yes"})", "invalid_stream"},
           {R"({"model":"fast","max_tokens":-1})", "invalid_max_tokens"},
           {R"({"model":"fast","max_tokens":1e309})", "invalid_max_tokens"},
           {R"({"model":"fast","max_tokens":"100"})", "invalid_max_tokens"},
           {R"({"model":"fast","max_tokens":18446744073709551616})", "invalid_max_tokens"},
           {R"({"model":"fast","max_tokens":0})", "invalid_max_tokens"},
           {R"({"model":"fast","options":{"num_predict":2.5}})", "invalid_max_tokens"},
       }) {
    auto e = err(run(*c, "/v1/chat/completions", body));
    EXPECT_EQ(e.status, 400u) << body;
    EXPECT_EQ(e.code, code) << body;
  }
}

// A member the policy reads, named twice: parsers disagree on which one
// counts, so the upstream might honour the one the policy did not read.
TEST(Policy, AMemberThePolicyReadsNamedTwiceIs400NamingIt) {
  auto c = policy("");
  for (auto [body, member] : std::vector<std::pair<std::string, std::string>>{
           {R"({"model":"gpt-4o-mini","max_tokens":16,"messages":[],"max_tokens":1000000})",
            "max_tokens"},
           {R"({"model":"gpt-4o-mini","model":"fast"})", "model"},
           {R"({"model":"fast","stream":false,"stream":true})", "stream"},
           {R"({"model":"fast","max_completion_tokens":5,"max_completion_tokens":5})",
            "max_completion_tokens"},
           {R"({"model":"fast","max_output_tokens":5,"max_output_tokens":9})", "max_output_tokens"},
           {R"({"model":"fast","n_predict":5,"n_predict":9})", "n_predict"},
           {R"({"model":"fast","stream_options":{},"stream_options":{}})", "stream_options"},
           {R"({"model":"fast","stream_options":{"include_usage":false,"include_usage":true}})",
            "stream_options.include_usage"},
           {R"({"model":"fast","options":{"num_predict":5,"num_predict":50}})",
            "options.num_predict"},
       }) {
    auto e = err(run(*c, "/v1/chat/completions", body));
    EXPECT_EQ(e.status, 400u) << body;
    EXPECT_EQ(e.type, "invalid_request_error") << body;
    EXPECT_EQ(e.code, "duplicate_member") << body;
    EXPECT_NE(e.message.find("'" + member + "'"), std::string::npos) << e.message;
  }
  // Members the policy does not read may repeat, as JSON allows.
  EXPECT_EQ(ok(run(*c, "/v1/chat/completions",
                   R"({"model":"fast","temperature":1,"temperature":0,"user":"a","user":"b"})"))
                .route->name,
            "alias");
  // Both spellings of one limit, once each, are no duplicate.
  EXPECT_EQ(*ok(run(*c, "/v1/chat/completions",
                    R"({"model":"fast","max_tokens":5,"max_completion_tokens":9})"))
                 .requested_limit,
            5);
}

TEST(Policy, LimitsAreInjectedClampedOrRejected) {
  auto c = policy("");
  auto injected = ok(run(*c, "/v1/chat/completions", R"({"model":"gpt-4o-mini"})"));
  EXPECT_TRUE(injected.limit_injected);
  EXPECT_EQ(injected.output_limit, 100);
  auto clamped = ok(
      run(*c, "/v1/chat/completions", R"({"model":"gpt-4o-mini","max_completion_tokens":5000})"));
  EXPECT_TRUE(clamped.limit_clamped);
  EXPECT_EQ(clamped.requested_limit, 5000);
  EXPECT_EQ(clamped.output_limit, 1000);
  auto smallest = ok(
      run(*c, "/v1/chat/completions", R"({"model":"gpt-4o-mini","max_tokens":30,"n_predict":20})"));
  EXPECT_EQ(smallest.output_limit, 20);
  auto rejected = err(run(*c, "/v1/chat/completions", R"({"model":"fast","max_tokens":51})"));
  EXPECT_EQ(rejected.status, 400u);
  EXPECT_EQ(rejected.code, "max_tokens_exceeded");
  EXPECT_NE(rejected.message.find("50"), std::string::npos);
  auto ceiling_injected = ok(run(*c, "/v1/chat/completions", R"({"model":"fast"})"));
  EXPECT_EQ(ceiling_injected.output_limit, 50);
}

TEST(Policy, EachUpstreamGetsTheSpellingItHonours) {
  auto c = policy("");
  auto body = std::string(R"({"model":"fast","max_completion_tokens":40,"messages":[]})");
  auto r = ok(run(*c, "/v1/chat/completions", body));
  auto sent = json::parse(body_for_target(body, "/v1/chat/completions", r, r.route->targets[0],
                                          c->upstreams.at("llama"), false))
                  .as_object();
  EXPECT_EQ(sent.at("max_tokens").as_int64(), 40);
  EXPECT_FALSE(sent.contains("max_completion_tokens"));
  EXPECT_EQ(sent.at("model").as_string(), "llama-3-8b");

  auto body2 = std::string(R"({"model":"o3-mini","max_tokens":40,"stream":true})");
  auto r2 = ok(run(*c, "/v1/chat/completions", body2));
  auto sent2 = json::parse(body_for_target(body2, "/v1/chat/completions", r2, r2.route->targets[0],
                                           c->upstreams.at("reasoning"), true))
                   .as_object();
  EXPECT_EQ(sent2.at("max_completion_tokens").as_int64(), 40);
  EXPECT_FALSE(sent2.contains("max_tokens"));
  EXPECT_EQ(sent2.at("stream_options").at("include_usage").as_bool(), true);

  auto body3 = std::string(R"({"model":"gpt-4o-mini","max_output_tokens":4000,"input":"hi"})");
  auto r3 = ok(run(*c, "/v1/responses", body3));
  auto sent3 = json::parse(body_for_target(body3, "/v1/responses", r3, r3.route->targets[0],
                                           c->upstreams.at("openai"), false))
                   .as_object();
  EXPECT_EQ(sent3.at("max_output_tokens").as_int64(), 1000);

  auto body4 =
      std::string(R"({"model":"gpt-4o-mini","options":{"num_predict":5000,"temperature":0}})");
  auto r4 = ok(run(*c, "/v1/chat/completions", body4));
  auto sent4 = json::parse(body_for_target(body4, "/v1/chat/completions", r4, r4.route->targets[0],
                                           c->upstreams.at("openai"), false))
                   .as_object();
  EXPECT_EQ(sent4.at("options").at("num_predict").as_int64(), 1000);
  EXPECT_EQ(sent4.at("max_tokens").as_int64(), 1000);
}

// Usage asked for on the client's behalf changes nothing else the engine
// sends: the other stream options stay, except continuous_usage_stats,
// which vLLM honours only with include_usage (so never, for this client).
TEST(Policy, UsageAskedForTheProxyLeavesTheClientsChunksAlone) {
  auto c = policy("");
  auto sent = [&](std::string body) {
    auto r = ok(run(*c, "/v1/chat/completions", body));
    return json::parse(body_for_target(body, "/v1/chat/completions", r, r.route->targets[0],
                                       c->upstreams.at("openai"), true))
        .at("stream_options")
        .as_object();
  };
  auto added = sent(
      R"({"model":"gpt-4o-mini","stream":true,"stream_options":{"continuous_usage_stats":true}})");
  EXPECT_TRUE(added.at("include_usage").as_bool());
  EXPECT_FALSE(added.at("continuous_usage_stats").as_bool());
  auto turned_on = sent(
      R"({"model":"gpt-4o-mini","stream":true,"stream_options":{"continuous_usage_stats":true,"include_usage":false,"x":1}})");
  EXPECT_TRUE(turned_on.at("include_usage").as_bool());
  EXPECT_FALSE(turned_on.at("continuous_usage_stats").as_bool());
  EXPECT_EQ(turned_on.at("x").as_int64(), 1);
  auto asked = sent(
      R"({"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}})");
  EXPECT_TRUE(asked.at("continuous_usage_stats").as_bool())
      << "the client asked for both: untouched";
}

TEST(Policy, PromptSizeCeiling) {
  auto c = policy("");
  auto e = err(run(*c, "/v1/messages",
                   R"({"model":"claude-x","max_tokens":5,"messages":[{"content":")" +
                       std::string(400, 'x') + "\"}]}"));
  EXPECT_EQ(e.status, 413u);
}

TEST(Policy, ClientKeys) {
  auto hash = sha256_hex("sk-team-a");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto c = policy("keys:\n  - {name: team-a, sha256: " + hash +
                  ", models: ['gpt-4o*'], max_output_tokens: 10}\n");
  EXPECT_EQ(err(run(*c, "/v1/chat/completions", R"({"model":"gpt-4o-mini"})")).status, 401u);
  EXPECT_EQ(err(run(*c, "/v1/chat/completions", R"({"model":"gpt-4o-mini"})", "sk-wrong")).status,
            401u);
  EXPECT_EQ(err(run(*c, "/v1/chat/completions", R"({"model":"fast"})", "sk-team-a")).status, 403u);
  auto r = ok(
      run(*c, "/v1/chat/completions", R"({"model":"gpt-4o-mini","max_tokens":500})", "sk-team-a"));
  EXPECT_EQ(r.key->name, "team-a");
  EXPECT_EQ(r.output_limit, 10);  // the key's ceiling is below the route's
  EXPECT_EQ(client_key_from("Bearer sk-1", ""), "sk-1");
  EXPECT_EQ(client_key_from("", "sk-2"), "sk-2");
}

TEST(Policy, ModelsListShowsNamesNotGlobs) {
  auto c = policy("");
  auto list = json::parse(models_list_json(*c, nullptr));
  std::vector<std::string> ids;
  for (const auto& m : list.at("data").as_array()) ids.emplace_back(m.at("id").as_string());
  EXPECT_EQ(ids, (std::vector<std::string>{"gpt-4o-mini", "fast"}));
}

}  // namespace
}  // namespace tokengate::routing
