#include "config/config.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "config/reload.hpp"

namespace tokengate::config {
namespace {

const char* minimal =
    "listeners:\n"
    "  - name: main\n"
    "    port: 0\n"
    "    upstream: local\n"
    "upstreams:\n"
    "  local:\n"
    "    base_url: http://127.0.0.1:9/v1\n";

std::string error_of(const std::string& yaml) {
  try {
    load_config_text(yaml, "test.yaml");
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, MinimalFileGetsDefaults) {
  auto c = load_config_text(minimal, "test.yaml");
  ASSERT_EQ(c->listeners.size(), 1u);
  EXPECT_EQ(c->listeners[0].upstream, "local");
  EXPECT_EQ(c->limits.max_body_bytes, 8u * 1024 * 1024);
  EXPECT_EQ(c->limits.forward_early_bytes, 64u * 1024);
  EXPECT_EQ(c->upstreams.at("local").timeouts.connect, std::chrono::seconds(5));
  EXPECT_EQ(c->upstreams.at("local").timeouts.pooled, std::chrono::seconds(60));
  EXPECT_FALSE(c->admin);
}

TEST(Config, AnUpstreamsKindSaysWhichAPIItSpeaks) {
  EXPECT_EQ(load_config_text(minimal, "test.yaml")->upstreams.at("local").kind, provider_kind::any);
  EXPECT_EQ(load_config_text(std::string(minimal) + "    kind: openai\n", "test.yaml")
                ->upstreams.at("local")
                .kind,
            provider_kind::openai);
  auto error = error_of(std::string(minimal) + "    kind: gemini\n");
  EXPECT_NE(error.find("kind must be 'any', 'openai' or 'anthropic'"), std::string::npos) << error;
  EXPECT_NE(error.find("test.yaml:8:"), std::string::npos) << error;
}

TEST(Config, AnUpstreamsApisSayWhatItServesOrItsKindDoes) {
  auto served = [](const std::string& extra) {
    return served_apis(load_config_text(minimal + extra, "test.yaml")->upstreams.at("local"));
  };
  EXPECT_EQ(served(""), api_set::all());
  EXPECT_EQ(api_names(served("    kind: openai\n")),
            "chat_completions, completions, responses, embeddings");
  EXPECT_EQ(api_names(served("    kind: anthropic\n")), "messages");
  EXPECT_EQ(served("    apis: [chat_completions]\n"), api_set().add(api::chat_completions));
  EXPECT_EQ(api_names(served("    kind: openai\n    apis: [chat_completions, embeddings]\n")),
            "chat_completions, embeddings");
  EXPECT_FALSE(load_config_text(minimal, "test.yaml")->upstreams.at("local").apis);

  auto error = error_of(std::string(minimal) + "    apis: [chat_completions, chat]\n");
  EXPECT_NE(error.find("test.yaml:8:30: unknown API 'chat' in 'apis' (expected one of: "
                       "chat_completions, completions, responses, messages, embeddings)"),
            std::string::npos)
      << error;
  error = error_of(std::string(minimal) + "    apis: [responses, responses]\n");
  EXPECT_NE(error.find("test.yaml:8:23: 'responses' is listed twice in 'apis'"), std::string::npos)
      << error;
  for (const char* bad : {"    apis: []\n", "    apis: chat_completions\n"}) {
    error = error_of(std::string(minimal) + bad);
    EXPECT_NE(error.find("test.yaml:8:11: 'apis' must be a list of APIs"), std::string::npos)
        << error;
  }
  error = error_of(std::string(minimal) + "demo_engine: {apis: [rerank]}\n");
  EXPECT_NE(error.find("unknown API 'rerank'"), std::string::npos) << error;
  EXPECT_EQ(load_config_text(std::string(minimal) + "demo_engine: {apis: [messages]}\n", "t.yaml")
                ->demo_engine->apis,
            api_set().add(api::messages));
}

TEST(Config, TracingNeedsAnEndpointAndSaneBounds) {
  auto c = load_config_text(std::string(minimal) +
                                "tracing:\n"
                                "  endpoint: https://otel.example:4318/v1/traces\n"
                                "  headers: {x-key: abc}\n"
                                "  sampling_ratio: 0.25\n"
                                "  resource: {deployment.environment: prod}\n",
                            "test.yaml");
  ASSERT_TRUE(c->tracing);
  EXPECT_EQ(c->tracing->sampling_ratio, 0.25);
  EXPECT_EQ(c->tracing->headers.at(0), (std::pair<std::string, std::string>{"x-key", "abc"}));
  EXPECT_EQ(c->tracing->resource.at(0).first, "deployment.environment");
  EXPECT_EQ(c->tracing->service_name, "tokengate");
  EXPECT_NE(
      error_of(std::string(minimal) + "tracing: {sampling_ratio: 1}\n").find("needs an 'endpoint'"),
      std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + "tracing: {endpoint: otel:4318}\n").find("http://"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + "tracing: {endpoint: http://a, sampling_ratio: 2}\n")
                .find("between 0"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + "tracing: {endpoint: http://a, exporter: x}\n")
                .find("unknown key 'exporter'"),
            std::string::npos);
}

TEST(Config, PromptCacheIsAutoOrOffWithAMinimum) {
  const std::string route = "routes:\n  - {name: r, models: ['*'], targets: [{upstream: local}]";
  auto off = load_config_text(std::string(minimal) + route + "}\n", "test.yaml");
  EXPECT_FALSE(off->routes.at(0).prompt_cache.automatic);
  auto on = load_config_text(std::string(minimal) + route + ", prompt_cache: auto}\n", "test.yaml");
  EXPECT_TRUE(on->routes.at(0).prompt_cache.automatic);
  EXPECT_EQ(on->routes.at(0).prompt_cache.min_tokens, 1024);
  auto mapped = load_config_text(
      std::string(minimal) + route + ", prompt_cache: {mode: auto, min_tokens: 2048}}\n",
      "test.yaml");
  EXPECT_TRUE(mapped->routes.at(0).prompt_cache.automatic);
  EXPECT_EQ(mapped->routes.at(0).prompt_cache.min_tokens, 2048);
  EXPECT_NE(error_of(std::string(minimal) + route + ", prompt_cache: always}\n")
                .find("test.yaml:9:74: prompt_cache must be auto or off"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + route + ", prompt_cache: {min_tokens: 0}}\n")
                .find("min_tokens"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + route + ", prompt_cache: {ttl: 5m}}\n")
                .find("unknown key 'ttl'"),
            std::string::npos);
  // The demo engine's side: its minimum and TTL.
  auto demo = load_config_text(
      std::string(minimal) + "demo_engine: {prompt_cache_min_tokens: 8, prompt_cache_ttl: 1h}\n",
      "test.yaml");
  EXPECT_EQ(demo->demo_engine->prompt_cache_min_tokens, 8);
  EXPECT_EQ(demo->demo_engine->prompt_cache_ttl, std::chrono::hours(1));
}

TEST(Config, PromptCacheOnARouteWithNoTargetReachedInMessagesIsWarnedOf) {
  auto routed_to = [](const std::string& upstream_yaml) {
    return load_config_text(std::string(minimal) + upstream_yaml +
                                "routes:\n  - {name: r, models: ['*'], targets: [{upstream: "
                                "local}, {upstream: other}], prompt_cache: auto}\n",
                            "test.yaml");
  };
  // local (kind any) takes chat as sent, and so does an OpenAI upstream
  auto none = routed_to("  other: {base_url: http://127.0.0.1:9/v1, kind: openai}\n");
  ASSERT_EQ(none->warnings.size(), 1u);
  EXPECT_EQ(none->warnings[0].rfind("test.yaml:10:", 0), 0u) << none->warnings[0];
  EXPECT_NE(none->warnings[0].find("route 'r': prompt_cache: auto marks only requests translated"),
            std::string::npos);
  for (const char* messages_only : {"kind: anthropic", "apis: [messages, responses]"})
    EXPECT_TRUE(routed_to(std::string("  other: {base_url: http://127.0.0.1:9/v1, ") +
                          messages_only + "}\n")
                    ->warnings.empty())
        << messages_only;
}

TEST(Config, ARouteCacheNeedsATtlAndSharesOnlyBetweenKeysOfTheSameModels) {
  const std::string route = "routes:\n  - {name: r, models: ['*'], targets: [{upstream: local}], ";
  auto c = load_config_text(std::string(minimal) + route +
                                "cache: {ttl: 10m, mode: always, max_entry_bytes: 4096}}\n"
                                "cache: {max_bytes: 1048576}\n",
                            "test.yaml");
  ASSERT_TRUE(c->routes.at(0).cache);
  EXPECT_EQ(c->routes.at(0).cache->ttl, std::chrono::minutes(10));
  EXPECT_EQ(c->routes.at(0).cache->mode, cache_mode::always);
  EXPECT_EQ(c->routes.at(0).cache->scope, cache_scope::key);
  EXPECT_EQ(c->routes.at(0).cache->max_entry_bytes, 4096u);
  EXPECT_EQ(c->cache_max_bytes, 1048576u);
  EXPECT_TRUE(has_caches(*c));
  EXPECT_NE(
      error_of(std::string(minimal) + route + "cache: {mode: always}}\n").find("needs a 'ttl'"),
      std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + route + "cache: {ttl: 1m, mode: sometimes}}\n")
                .find("deterministic or always"),
            std::string::npos);
  const std::string keys = "keys:\n  - {name: a, sha256: " + std::string(64, 'a') +
                           ", models: [x]}\n"
                           "  - {name: b, sha256: " +
                           std::string(64, 'b') + "}\n";
  auto shared = error_of(std::string(minimal) + route + "cache: {ttl: 1m, scope: route}}\n" + keys);
  EXPECT_NE(shared.find("test.yaml:"), std::string::npos) << shared;
  EXPECT_NE(shared.find("different models"), std::string::npos) << shared;
  EXPECT_EQ(error_of(std::string(minimal) + route + "cache: {ttl: 1m, scope: key}}\n" + keys), "");
}

TEST(Config, ACachePacesBillsAndStoresAsItSays) {
  const std::string route = "routes:\n  - {name: r, models: ['*'], targets: [{upstream: local}], ";
  auto c = load_config_text(std::string(minimal) + route +
                                "cache: {ttl: 1m, pace: original, bill_hits: true}}\n"
                                "redis: {url: \"redis://127.0.0.1:6379\"}\n"
                                "cache: {store: redis}\n",
                            "test.yaml");
  EXPECT_TRUE(c->routes.at(0).cache->paced);
  EXPECT_TRUE(c->routes.at(0).cache->bill_hits);
  EXPECT_TRUE(c->cache_in_redis);
  auto plain = load_config_text(std::string(minimal) + route + "cache: {ttl: 1m}}\n", "t.yaml");
  EXPECT_FALSE(plain->routes.at(0).cache->paced);
  EXPECT_FALSE(plain->routes.at(0).cache->bill_hits);
  EXPECT_FALSE(plain->cache_in_redis);
  EXPECT_NE(error_of(std::string(minimal) + route + "cache: {ttl: 1m, pace: fast}}\n")
                .find("none or original"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + route + "cache: {ttl: 1m, bill_hits: maybe}}\n")
                .find("true or false"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + route + "cache: {ttl: 1m}}\ncache: {store: redis}\n")
                .find("needs the top-level 'redis:'"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + route + "cache: {ttl: 1m}}\ncache: {store: disk}\n")
                .find("memory or redis"),
            std::string::npos);
}

TEST(Config, APooledConnectionsLongestWaitIsSetPerUpstream) {
  auto c = load_config_text(std::string(minimal) + "    timeouts: {pooled: 5s}\n", "test.yaml");
  EXPECT_EQ(c->upstreams.at("local").timeouts.pooled, std::chrono::seconds(5));
  EXPECT_NE(error_of(std::string(minimal) + "    timeouts: {pooled: forever}\n")
                .find("must be a duration"),
            std::string::npos);
}

std::vector<std::string> restart_needed(const std::string& running, const std::string& next) {
  return changes_needing_restart(*load_config_text(running, "running.yaml"),
                                 *load_config_text(next, "next.yaml"));
}

TEST(Reload, SaysWhatWaitsForARestartAndNothingElse) {
  const std::string base(minimal);
  EXPECT_TRUE(restart_needed(base, base).empty());
  // upstream settings are policy: a reload applies them
  EXPECT_TRUE(
      restart_needed(base, base + "    pool_size: 3\n    timeouts: {pooled: 5s}\n").empty());
  using names = std::vector<std::string>;
  EXPECT_EQ(restart_needed(base, base + "limits: {max_body_bytes: 1000}\nworkers: 3\n"),
            (names{"workers", "limits"}));
  EXPECT_EQ(restart_needed(base, base + "memory: {after_burst: keep}\nlog_level: debug\n"),
            (names{"memory.after_burst"}));
  auto moved = base;
  moved.replace(moved.find("port: 0"), 7, "port: 1234");
  EXPECT_EQ(restart_needed(base, moved),
            (names{"listeners (addresses, ports, certificate files)"}));
}

TEST(Reload, FollowsTheListenersUpstreamButNeverLeavesItWithoutOne) {
  auto running = load_config_text(minimal, "running.yaml");
  const auto& bound = running->listeners.at(0);
  auto renamed = load_config_text(
      "listeners: [{name: main, port: 0, upstream: other}]\n"
      "upstreams: {other: {base_url: http://127.0.0.1:9/v1}}\n",
      "renamed.yaml");
  EXPECT_EQ(as_configured(*renamed, bound).upstream, "other");
  EXPECT_NO_THROW(check_bound_listeners_keep_an_upstream(running->listeners, *renamed));
  auto without_main = load_config_text(
      "listeners: [{name: second, port: 0, upstream: other}]\n"
      "upstreams: {other: {base_url: http://127.0.0.1:9/v1}}\n",
      "without_main.yaml");
  EXPECT_EQ(&as_configured(*without_main, bound), &bound);
  EXPECT_THROW(check_bound_listeners_keep_an_upstream(running->listeners, *without_main),
               config_error);
  auto routed = load_config_text(
      "listeners: [{name: second, port: 0}]\n"
      "upstreams: {other: {base_url: http://127.0.0.1:9/v1}}\n"
      "routes: [{models: [m], targets: [{upstream: other}]}]\n",
      "routed.yaml");
  EXPECT_NO_THROW(check_bound_listeners_keep_an_upstream(running->listeners, *routed));
}

TEST(Config, EmbeddedDefaultIsValid) {
  auto c = load_embedded_config();
  EXPECT_TRUE(c->demo_engine);
  EXPECT_EQ(c->listeners.at(0).port, 8080);
}

TEST(Config, ShippedConfigFilesAreValid) {
  const std::string dir = std::string(TOKENGATE_FIXTURES) + "/../../config/";
  auto c = load_config_file(dir + "tokengate.yaml");
  EXPECT_EQ(c->upstreams.count("demo"), 1u);
  EXPECT_EQ(c->routes.size(), 2u);
  for (auto name : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GROQ_API_KEY"})
    ::setenv(name, "test", 1);
  auto hosted = load_config_file(dir + "hosted.yaml");
  EXPECT_EQ(hosted->upstreams.at("anthropic").kind, provider_kind::anthropic);
  EXPECT_EQ(hosted->keys.size(), 2u);
  auto fleet = load_config_file(dir + "self-hosted.yaml");
  EXPECT_EQ(fleet->upstreams.at("llamacpp").limit_spelling, limit_field::max_tokens);
}

TEST(Config, TheBudgetExampleRunsOnTheEnvironmentAlone) {
  const std::string dir = std::string(TOKENGATE_FIXTURES) + "/../../config/";
  for (auto [name, value] : {std::pair{"LISTEN_PORT", "8080"},
                             {"ADMIN_PORT", "9090"},
                             {"UPSTREAM_URL", "http://127.0.0.1:8000/v1"},
                             {"REDIS_URL", "redis://:s3cret@10.0.0.5:6380/2"},
                             {"TOKENS_PER_MINUTE", "20000"},
                             {"CLIENT_KEY_SHA256",
                              "00000000000000000000000000000000000000000000000"
                              "00000000000000000"}})
    ::setenv(name, value, 1);
  auto c = load_config_file(dir + "budgets.yaml");
  EXPECT_EQ(c->keys.at(0).budget.tokens_per_minute, 20000);
  ASSERT_TRUE(c->redis);
  EXPECT_EQ(c->redis->host, "10.0.0.5");
  EXPECT_EQ(c->redis->port, 6380);
  EXPECT_EQ(c->redis->password, "s3cret");
  EXPECT_EQ(c->redis->database, 2);
  EXPECT_EQ(c->redis->on_failure, store_failure_mode::allow_local);
  EXPECT_TRUE(has_budgets(*c));
}

// A budget that cannot hold fails `tokengate check` with its position.
TEST(Config, BudgetsThatCannotHoldAreRefusedWithTheirPosition) {
  const std::string routed = std::string(minimal) +
                             "routes:\n"
                             "  - name: chat\n"
                             "    models: [\"gpt-*\"]\n"
                             "    targets: [{upstream: local}]\n";
  EXPECT_NE(error_of(routed + "    budget: {tokens_per_minute: -5}\n").find("test.yaml:12:"),
            std::string::npos);
  EXPECT_NE(error_of(routed + "    budget: {tokens_per_minute: 0}\n").find("must be between 1"),
            std::string::npos);
  EXPECT_NE(
      error_of(routed + "    budget: {tokens_per_hour: 5}\n").find("unknown key 'tokens_per_hour'"),
      std::string::npos);
  EXPECT_NE(error_of(routed + "    budget: {}\n").find("at least one limit"), std::string::npos);
  EXPECT_NE(error_of(routed + "    budget: {usd_per_day: 0}\n").find("must be more than 0"),
            std::string::npos);
  EXPECT_NE(error_of(routed + "    budget: {usd_per_day: 5}\n").find("needs 'prices'"),
            std::string::npos);
  EXPECT_NE(error_of(routed + "prices:\n  claude-3: {input_per_million: 3}\n")
                .find("test.yaml:13:13: a price for model 'claude-3', which no route serves"),
            std::string::npos);
  EXPECT_EQ(error_of(routed + "prices:\n  gpt-4o: {input_per_million: 3}\n"), "");
  EXPECT_EQ(error_of(routed + "prices:\n  gpt-4o: {input_per_million: 3, "
                              "cached_input_per_million: 0.3, cache_write_per_million: 3.75}\n"),
            "");
  EXPECT_NE(error_of(routed + "prices:\n  gpt-4o: {cached_input_per_million: -1}\n")
                .find("cached_input_per_million"),
            std::string::npos);
  EXPECT_NE(error_of(routed + "redis: {url: \"http://x\"}\n").find("redis://host:port"),
            std::string::npos);
  EXPECT_NE(error_of(routed + "redis: {url: \"redis://x:99999\"}\n").find("from 1 to 65535"),
            std::string::npos);
  EXPECT_NE(
      error_of(routed + "redis: {url: \"redis://x\", timeout: 0ms}\n").find("must be more than 0"),
      std::string::npos);
  EXPECT_NE(error_of(routed + "redis: {url: \"redis://x\", on_store_failure: hope}\n")
                .find("deny or allow_local"),
            std::string::npos);
}

TEST(Config, TheFleetExampleRunsOnTheEnvironmentAlone) {
  const std::string dir = std::string(TOKENGATE_FIXTURES) + "/../../config/";
  for (auto [name, value] : {std::pair{"LISTEN_PORT", "8080"},
                             {"ADMIN_PORT", "9090"},
                             {"ENGINE_1_URL", "http://10.0.0.1:8000/v1"},
                             {"ENGINE_2_URL", "http://10.0.0.2:8000/v1"},
                             {"ENGINE_3_URL", "http://10.0.0.3:8000/v1"}})
    ::setenv(name, value, 1);
  auto c = load_config_file(dir + "fleet.yaml");
  ASSERT_EQ(c->routes.size(), 1u);
  const auto& r = c->routes[0];
  EXPECT_EQ(r.targets.size(), 3u);
  ASSERT_TRUE(r.affinity && r.queue);
  EXPECT_EQ(r.queue->timeout, std::chrono::seconds(10));
  for (const auto& [name, u] : c->upstreams) {
    EXPECT_EQ(u.capacity.max_streams, 4) << name;
    EXPECT_TRUE(u.health_check && u.engine_metrics) << name;
  }
}

// Capacity that cannot hold fails `tokengate check` with its position.
TEST(Config, FleetSettingsThatCannotHoldAreRefused) {
  const std::string routed = std::string(minimal) +
                             "routes:\n"
                             "  - name: chat\n"
                             "    models: [m]\n"
                             "    targets: [{upstream: local}]\n";
  auto with_capacity = [](const std::string& yaml, const std::string& capacity) {
    auto at = yaml.find("routes:");
    return yaml.substr(0, at) + "    capacity: " + capacity + "\n" + yaml.substr(at);
  };
  EXPECT_NE(error_of(with_capacity(routed, "{max_streams: 0}")).find("must be between 1"),
            std::string::npos);
  EXPECT_NE(error_of(routed + "    queue: {max_waiting: 10}\n").find("a queue needs a 'timeout'"),
            std::string::npos);
  EXPECT_NE(error_of(routed + "    queue: {timeout: 5s}\n").find("nothing would ever wait"),
            std::string::npos);
  EXPECT_EQ(error_of(with_capacity(routed, "{max_streams: 4}") + "    queue: {timeout: 5s}\n"), "");
  EXPECT_NE(error_of(with_capacity(routed, "{max_streams: 4}") + "    queue: {timeout: 0s}\n")
                .find("must be more than 0"),
            std::string::npos);
  EXPECT_NE(error_of(routed + "    balance: round_robin\n")
                .find("least_loaded, weighted_random or fastest"),
            std::string::npos);
  EXPECT_NE(error_of(routed + "    affinity: {max_load_ratio: 0.5}\n").find("between 1"),
            std::string::npos);
  EXPECT_EQ(
      error_of(with_capacity(routed, "{max_prefill_tokens: 8000}") + "    queue: {timeout: 5s}\n"),
      "");  // (a prefill budget is a bound a request may wait for)
  EXPECT_NE(error_of(with_capacity(routed, "{max_prefill_tokens: 0}")).find("must be between 1"),
            std::string::npos);
  auto checked = std::string(minimal) + "    health_check: {interval: 1s, timeout: 2s}\n";
  EXPECT_NE(error_of(checked).find("not be longer than 'interval'"), std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + "    health_check: {path: health}\n")
                .find("a path starting with /"),
            std::string::npos);
}

// A setting another replaced is accepted, with a warning that says what
// replaced it and where it is.
TEST(Config, AffinityUnderBalanceFastestIsAcceptedWithAWarning) {
  const std::string routed = std::string(minimal) +
                             "routes:\n"
                             "  - name: chat\n"
                             "    models: [m]\n"
                             "    targets: [{upstream: local}]\n"
                             "    affinity: {hold: 1s}\n";
  auto fastest = load_config_text(routed + "    balance: fastest\n", "fleet.yaml");
  ASSERT_EQ(fastest->warnings.size(), 1u);
  EXPECT_EQ(fastest->warnings[0].rfind("fleet.yaml:", 0), 0u) << fastest->warnings[0];
  EXPECT_NE(fastest->warnings[0].find("affinity does nothing under balance: fastest"),
            std::string::npos);
  EXPECT_NE(fastest->warnings[0].find("not `hold`"), std::string::npos);
  EXPECT_TRUE(load_config_text(routed, "fleet.yaml")->warnings.empty());
}

TEST(Config, RoutesMustNameKnownUpstreamsAndPaths) {
  auto base = std::string(minimal);
  EXPECT_NE(error_of(base + "routes:\n  - {models: [m], targets: [{upstream: nope}]}\n")
                .find("unknown upstream 'nope'"),
            std::string::npos);
  EXPECT_NE(
      error_of(base + "routes:\n  - {models: [m], paths: [/v2/x], targets: [{upstream: local}]}\n")
          .find("unknown path"),
      std::string::npos);
  EXPECT_NE(
      error_of(base + "routes:\n  - {models: [m], targets: []}\n").find("at least one target"),
      std::string::npos);
  EXPECT_NE(error_of(base + "routes:\n  - {models: [m], targets: [{upstream: local}], "
                            "max_output_tokens: {default: 9, ceiling: 5}}\n")
                .find("above the ceiling"),
            std::string::npos);
  EXPECT_NE(error_of(base + "keys:\n  - {name: k, sha256: abc}\n").find("64 hex digits"),
            std::string::npos);
}

TEST(Config, UnknownKeyIsRejectedWithItsPosition) {
  auto err = error_of(std::string(minimal) + "limits:\n  max_body_byte: 10\n");
  EXPECT_NE(err.find("test.yaml:9:3: unknown key 'max_body_byte'"), std::string::npos) << err;
}

TEST(Config, SyntaxErrorNamesLineAndColumn) {
  auto err = error_of("listeners: [\n  - a: b\n");
  EXPECT_EQ(err.rfind("test.yaml:", 0), 0u) << err;
  EXPECT_NE(err.find(":2:"), std::string::npos) << err;
}

TEST(Config, ListenerMustNameAKnownUpstream) {
  auto yaml = std::string(minimal);
  yaml.replace(yaml.find("upstream: local"), 15, "upstream: nope");
  auto err = error_of(yaml);
  EXPECT_NE(err.find("test.yaml:4:15: listener 'main' names unknown upstream 'nope'"),
            std::string::npos)
      << err;
}

TEST(Config, BadValuesAreExplained) {
  EXPECT_NE(
      error_of(std::string(minimal) + "limits:\n  head_timeout: soon\n").find("must be a duration"),
      std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + "limits:\n  tls_handshake_timeout: soon\n")
                .find("must be a duration"),
            std::string::npos);
  EXPECT_NE(
      error_of(std::string(minimal) + "limits:\n  max_body_bytes: -5\n").find("must be between"),
      std::string::npos);
  EXPECT_NE(error_of(std::string(minimal) + "log_level: loud\n").find("unknown log_level"),
            std::string::npos);
  EXPECT_NE(error_of("upstreams: {}\n").find("at least one upstream"), std::string::npos);
}

// admin.trace_url: the status page's link to a trace, a web address that
// names the trace.
TEST(Config, AnAdminTraceUrlIsAWebAddressWithTheTraceId) {
  auto c = load_config_text(
      std::string(minimal) + "admin:\n  port: 0\n  trace_url: https://tempo/trace/{trace_id}\n",
      "test.yaml");
  ASSERT_TRUE(c->admin);
  EXPECT_EQ(c->admin->trace_url, "https://tempo/trace/{trace_id}");
  EXPECT_EQ(
      load_config_text(std::string(minimal) + "admin: {port: 0}\n", "test.yaml")->admin->trace_url,
      "");
  for (const char* bad :
       {"https://tempo/trace/", "javascript:alert({trace_id})", "/trace/{trace_id}"}) {
    auto error = error_of(std::string(minimal) + "admin:\n  trace_url: \"" + bad + "\"\n");
    EXPECT_NE(error.find("test.yaml:9:14: trace_url must be an http:// or https:// URL with "
                         "{trace_id} in it"),
              std::string::npos)
        << bad << ": " << error;
  }
}

// memory.after_burst: give_back by default, lazy_free or keep on request,
// nothing else.
TEST(Config, MemoryAfterABurstIsGivenBackUnlessLazyFreeOrKeepIsAsked) {
  auto after_burst = [](const std::string& yaml) {
    return load_config_text(std::string(minimal) + yaml, "test.yaml")->after_burst;
  };
  EXPECT_EQ(after_burst(""), memory_after_burst::give_back);
  EXPECT_EQ(after_burst("memory: {after_burst: give_back}\n"), memory_after_burst::give_back);
  EXPECT_EQ(after_burst("memory: {after_burst: lazy_free}\n"), memory_after_burst::lazy_free);
  EXPECT_EQ(after_burst("memory: {after_burst: keep}\n"), memory_after_burst::keep);
  auto bad = error_of(std::string(minimal) + "memory: {after_burst: hold}\n");
  EXPECT_NE(bad.find("test.yaml:8:"), std::string::npos) << bad;
  EXPECT_NE(bad.find("after_burst must be give_back, lazy_free or keep"), std::string::npos) << bad;
  EXPECT_NE(error_of(std::string(minimal) + "memory: {keep: true}\n").find("keep"),
            std::string::npos);
}

TEST(Config, SecretsComeFromTheEnvironment) {
  ::setenv("TOKENGATE_TEST_KEY", "sk-test-123", 1);
  auto yaml = std::string(minimal) + "    api_key: ${TOKENGATE_TEST_KEY}\n";
  EXPECT_EQ(load_config_text(yaml, "t")->upstreams.at("local").api_key, "sk-test-123");
  ::unsetenv("TOKENGATE_TEST_KEY");
  EXPECT_NE(error_of(yaml).find("environment variable TOKENGATE_TEST_KEY is not set"),
            std::string::npos);
}

// Ports, worker counts, limits and durations from the environment, as
// Kubernetes and systemd set them: each value read as the type its key
// needs, quoted or not.
TEST(Config, AnyScalarMayComeFromTheEnvironment) {
  ::setenv("TG_PORT", "8443", 1);
  ::setenv("TG_WORKERS", "3", 1);
  ::setenv("TG_BODY", "1048576", 1);
  ::setenv("TG_IDLE", "45s", 1);
  ::setenv("TG_RATE", "12.5", 1);
  ::setenv("TG_MODEL", "gpt-4o-mini", 1);
  // (In YAML's flow style, {…} and […], braces end the mapping: there a
  // ${NAME} must be quoted. In block style it may be written bare.)
  auto c = load_config_text(
      "workers: ${TG_WORKERS}\n"
      "listeners:\n"
      "  - name: main\n"
      "    port: ${TG_PORT}\n"
      "upstreams:\n"
      "  local:\n"
      "    base_url: http://127.0.0.1:${TG_PORT}/v1\n"
      "    timeouts: {idle: \"${TG_IDLE}\"}\n"
      "routes:\n"
      "  - models: [\"${TG_MODEL}\", 'x-${TG_WORKERS}']\n"
      "    targets: [{upstream: local}]\n"
      "    max_output_tokens: {ceiling: '${TG_WORKERS}00'}\n"
      "limits:\n"
      "  max_body_bytes: \"${TG_BODY}\"\n"
      "  idle_timeout: ${TG_IDLE}\n"
      "demo_engine:\n"
      "  decode_tokens_per_second: ${TG_RATE}\n",
      "env.yaml");
  EXPECT_EQ(c->workers, 3);
  EXPECT_EQ(c->listeners[0].port, 8443);
  EXPECT_EQ(c->upstreams.at("local").base_url, "http://127.0.0.1:8443/v1");
  EXPECT_EQ(c->upstreams.at("local").timeouts.idle, std::chrono::seconds(45));
  EXPECT_EQ(c->routes[0].models, (std::vector<std::string>{"gpt-4o-mini", "x-3"}));
  EXPECT_EQ(c->routes[0].limits.ceiling, 300);
  EXPECT_EQ(c->limits.max_body_bytes, 1048576u);
  EXPECT_EQ(c->limits.idle_timeout, std::chrono::seconds(45));
  EXPECT_EQ(c->demo_engine->decode_tokens_per_second, 12.5);
}

TEST(Config, AValueFromTheEnvironmentThatIsNotOfItsKeysTypeIsPlacedAndShown) {
  const std::string listener = "listeners:\n  - name: main\n    port: ${TG_PORT}\n";
  const std::string upstream = "upstreams: {local: {base_url: 'http://a/v1'}}\n";
  ::setenv("TG_PORT", "eighty", 1);
  auto error = error_of(listener + upstream);
  EXPECT_NE(error.find("test.yaml:3:11: 'port' must be an integer ('${TG_PORT}' is 'eighty')"),
            std::string::npos)
      << error;
  ::setenv("TG_PORT", "70000", 1);
  error = error_of(listener + upstream);
  EXPECT_NE(error.find("test.yaml:3:11: 'port' must be between 0 and 65535"), std::string::npos)
      << error;
  ::setenv("TG_IDLE", "soon", 1);
  error = error_of(std::string(minimal) + "limits:\n  idle_timeout: ${TG_IDLE}\n");
  EXPECT_NE(error.find("test.yaml:9:17: 'idle_timeout' must be a duration like 250ms, 5s or 2m "
                       "('${TG_IDLE}' is 'soon')"),
            std::string::npos)
      << error;
  ::unsetenv("TG_UNSET");
  error = error_of("workers: ${TG_UNSET}\n" + std::string(minimal));
  EXPECT_NE(error.find("test.yaml:1:10: environment variable TG_UNSET is not set"),
            std::string::npos)
      << error;
}

TEST(Duration, ParsesUnits) {
  EXPECT_EQ(parse_duration("250ms"), duration(250));
  EXPECT_EQ(parse_duration("5s"), duration(5000));
  EXPECT_EQ(parse_duration("2m"), duration(120000));
  EXPECT_EQ(parse_duration("30"), duration(30000));
  EXPECT_EQ(parse_duration("1.5s"), duration(1500));
  EXPECT_FALSE(parse_duration("-1s"));
  EXPECT_FALSE(parse_duration("5 parsecs"));
  EXPECT_FALSE(parse_duration(""));
}

}  // namespace
}  // namespace tokengate::config
