#include "config/config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "config/budget_section.hpp"
#include "config/cache_section.hpp"
#include "config/fleet_section.hpp"
#include "config/tracing_section.hpp"
#include "config/yaml_reader.hpp"

namespace tokengate {
extern const std::string_view embedded_default_config;
}

namespace tokengate::config {
namespace {

listener read_listener(const reader& r, std::size_t index) {
  r.only_keys({"name", "address", "port", "tls", "upstream"});
  listener l;
  l.name = r.text("name", "listener" + std::to_string(index));
  l.address = r.text("address", l.address);
  l.port = r.integer<std::uint16_t>("port", l.port, 0, 65535);
  l.upstream = r.text("upstream", "");
  if (r.has("tls")) {
    auto t = r.child("tls");
    t.only_keys({"cert_file", "key_file"});
    tls_files files{t.text("cert_file", ""), t.text("key_file", "")};
    if (files.cert_file.empty() || files.key_file.empty())
      t.fail("tls needs both 'cert_file' and 'key_file'");
    l.tls = files;
  }
  return l;
}

// `apis: [chat_completions, responses]`: a list of known names, each once.
api_set read_apis(const reader& r, const char* key) {
  auto n = r.node()[key];
  if (!n.IsSequence() || n.size() == 0)
    r.fail_at(n, std::string("'") + key + "' must be a list of APIs (" + api_names() + ")");
  api_set set;
  for (const auto& item : n) {
    auto name = item.IsScalar() ? r.expand_env(item, item.Scalar()) : std::string();
    auto a = api_named(name);
    if (!a)
      r.fail_at(item, "unknown API '" + name + "' in '" + key +
                          "' (expected one of: " + api_names() + ")");
    if (set.has(*a)) r.fail_at(item, "'" + name + "' is listed twice in '" + key + "'");
    set.add(*a);
  }
  return set;
}

upstream read_upstream(const reader& r, const std::string& name) {
  r.only_keys({"base_url", "kind", "api_key", "ca_file", "timeouts", "pool_size",
               "max_concurrent_streams", "limit_field", "capacity", "health_check",
               "engine_metrics", "apis"});
  upstream u;
  u.name = name;
  u.base_url = r.text("base_url", "");
  if (u.base_url.rfind("http://", 0) != 0 && u.base_url.rfind("https://", 0) != 0)
    r.fail("upstream '" + name + "' needs a base_url starting with http:// or https://");
  auto kind = r.text("kind", "any");
  if (kind == "any")
    u.kind = provider_kind::any;
  else if (kind == "openai")
    u.kind = provider_kind::openai;
  else if (kind == "anthropic")
    u.kind = provider_kind::anthropic;
  else
    r.fail_at(r.node()["kind"], "kind must be 'any', 'openai' or 'anthropic'");
  if (r.has("apis")) u.apis = read_apis(r, "apis");
  u.api_key = r.text("api_key", "");
  u.ca_file = r.text("ca_file", "");
  u.pool_size = r.integer<std::size_t>("pool_size", u.pool_size, 0, 100000);
  u.max_concurrent_streams = r.integer<std::size_t>("max_concurrent_streams", 0, 0, 10'000'000);
  auto spelling = r.text("limit_field", "keep");
  if (spelling == "keep")
    u.limit_spelling = limit_field::keep;
  else if (spelling == "max_tokens")
    u.limit_spelling = limit_field::max_tokens;
  else if (spelling == "max_completion_tokens")
    u.limit_spelling = limit_field::max_completion_tokens;
  else
    r.fail_at(r.node()["limit_field"],
              "limit_field must be keep, max_tokens or max_completion_tokens");
  if (r.has("capacity")) u.capacity = read_capacity(r.child("capacity"));
  if (r.has("health_check")) u.health_check = read_health_check(r.child("health_check"));
  if (r.has("engine_metrics")) u.engine_metrics = read_engine_metrics(r.child("engine_metrics"));
  if (r.has("timeouts")) {
    auto t = r.child("timeouts");
    t.only_keys({"connect", "first_byte", "first_token", "idle", "total", "pooled"});
    u.timeouts.connect = t.time("connect", u.timeouts.connect);
    u.timeouts.first_byte = t.time("first_byte", u.timeouts.first_byte);
    u.timeouts.first_token = t.time("first_token", u.timeouts.first_token);
    u.timeouts.idle = t.time("idle", u.timeouts.idle);
    u.timeouts.total = t.time("total", u.timeouts.total);
    u.timeouts.pooled = t.time("pooled", u.timeouts.pooled);
  }
  return u;
}

void read_limits(const reader& r, limit_settings& l) {
  r.only_keys({"max_head_bytes", "max_header_count", "max_body_bytes", "head_timeout",
               "tls_handshake_timeout", "body_timeout", "idle_timeout", "client_write_timeout",
               "stream_buffer_bytes", "max_connections", "max_connections_per_client",
               "forward_early_bytes"});
  l.max_head_bytes = r.integer<std::size_t>("max_head_bytes", l.max_head_bytes, 1024, 1 << 20);
  l.max_header_count = r.integer<std::size_t>("max_header_count", l.max_header_count, 8, 10000);
  l.max_body_bytes = r.integer<std::size_t>("max_body_bytes", l.max_body_bytes, 1, 1LL << 30);
  l.head_timeout = r.time("head_timeout", l.head_timeout);
  l.tls_handshake_timeout = r.time("tls_handshake_timeout", l.tls_handshake_timeout);
  l.body_timeout = r.time("body_timeout", l.body_timeout);
  l.idle_timeout = r.time("idle_timeout", l.idle_timeout);
  l.client_write_timeout = r.time("client_write_timeout", l.client_write_timeout);
  l.stream_buffer_bytes =
      r.integer<std::size_t>("stream_buffer_bytes", l.stream_buffer_bytes, 512, 1 << 20);
  l.forward_early_bytes =
      r.integer<std::size_t>("forward_early_bytes", l.forward_early_bytes, 0, 1LL << 30);
  l.max_connections = r.integer<std::size_t>("max_connections", l.max_connections, 0, 1 << 24);
  l.max_connections_per_client = r.integer<std::size_t>("max_connections_per_client",
                                                        l.max_connections_per_client, 0, 1 << 24);
}

std::vector<std::string> string_list(const reader& r, const char* key) {
  std::vector<std::string> out;
  if (!r.has(key)) return out;
  auto n = r.node()[key];
  if (n.IsScalar()) return {r.expand_env(n, n.as<std::string>())};
  if (!n.IsSequence())
    r.fail_at(n, std::string("'") + key + "' must be a string or a list of strings");
  for (const auto& item : n) {
    if (!item.IsScalar()) r.fail_at(item, std::string("'") + key + "' must list strings");
    out.push_back(r.expand_env(item, item.as<std::string>()));
  }
  return out;
}

token_limits read_token_limits(const reader& r) {
  r.only_keys({"default", "ceiling", "mode"});
  token_limits t;
  if (r.has("default")) t.default_output = r.integer<long long>("default", 0, 1, 10'000'000);
  if (r.has("ceiling")) t.ceiling = r.integer<long long>("ceiling", 0, 1, 10'000'000);
  auto mode = r.text("mode", "clamp");
  if (mode == "clamp")
    t.mode = limit_mode::clamp;
  else if (mode == "reject")
    t.mode = limit_mode::reject;
  else
    r.fail_at(r.node()["mode"], "mode must be clamp or reject");
  if (t.default_output && t.ceiling && *t.default_output > *t.ceiling)
    r.fail("the default output limit is above the ceiling");
  return t;
}

const std::vector<std::string>& model_bearing_paths() {
  static const std::vector<std::string> paths{"/v1/chat/completions", "/v1/completions",
                                              "/v1/responses", "/v1/embeddings", "/v1/messages"};
  return paths;
}

retry_settings read_retry(const reader& r) {
  r.only_keys({"same_target", "rate_limited", "retry_after_cap", "per_target"});
  retry_settings s;
  s.same_target = r.integer<int>("same_target", s.same_target, 0, 10);
  s.rate_limited = r.integer<int>("rate_limited", s.rate_limited, 0, 10);
  s.retry_after_cap = r.time("retry_after_cap", s.retry_after_cap);
  if (r.has("per_target")) {
    auto t = r.child("per_target");
    t.only_keys({"retries", "window"});
    s.per_target = t.integer<int>("retries", s.per_target, 0, 1'000'000);
    s.per_target_window = t.time("window", s.per_target_window);
    if (s.per_target_window.count() <= 0) t.fail("per_target.window must be more than 0");
  }
  return s;
}

resume_settings read_resume(const reader& r) {
  r.only_keys({"mode", "max_resumes", "buffer_bytes"});
  resume_settings s;
  auto mode = r.text("mode", "off");
  if (mode == "restart")
    s.mode = resume_mode::restart;
  else if (mode == "prefill")
    s.mode = resume_mode::prefill;
  else if (mode != "off")
    r.fail_at(r.node()["mode"], "resume.mode must be off, restart or prefill");
  s.max_resumes = r.integer<int>("max_resumes", s.max_resumes, 0, 10);
  s.buffer_bytes = r.integer<std::size_t>("buffer_bytes", s.buffer_bytes, 0, 16 * 1024 * 1024);
  return s;
}

// `prompt_cache: auto | off`, or `{mode: auto, min_tokens: N}`.
prompt_cache_settings read_prompt_cache(const reader& r) {
  prompt_cache_settings s;
  std::string mode;
  if (r.node().IsScalar()) {
    mode = r.node().as<std::string>();
  } else {
    r.only_keys({"mode", "min_tokens"});
    mode = r.text("mode", "auto");
    s.min_tokens = r.integer<long long>("min_tokens", s.min_tokens, 1, 10'000'000);
  }
  if (mode != "auto" && mode != "off")
    r.fail("prompt_cache must be auto or off (or {mode, min_tokens})");
  s.automatic = mode == "auto";
  return s;
}

// `prompt_cache: auto` marks only requests translated for Anthropic's
// Messages API: a route none of whose targets is reached that way (one
// that serves messages and not chat completions) would mark nothing,
// which ops would otherwise learn from their bill.
void check_prompt_caches(const reader& root, config& c) {
  const auto& routes = root.node()["routes"];
  for (std::size_t i = 0; i < c.routes.size(); ++i) {
    const auto& rt = c.routes[i];
    if (!rt.prompt_cache.automatic) continue;
    bool reached_in_messages =
        std::any_of(rt.targets.begin(), rt.targets.end(), [&](const auto& t) {
          auto apis = served_apis(c.upstreams.at(t.upstream));
          return apis.has(api::messages) && !apis.has(api::chat_completions);
        });
    if (!reached_in_messages)
      c.warnings.push_back(root.said_at(
          routes[i]["prompt_cache"],
          "route '" + rt.name +
              "': prompt_cache: auto marks only requests translated for Anthropic's Messages "
              "API, and none of its targets is reached that way (kind: anthropic, or apis "
              "with messages and without chat_completions): it marks nothing"));
  }
}

route read_route(const reader& r, std::size_t index, const config& c) {
  r.only_keys({"name", "paths", "models", "targets", "max_output_tokens", "max_prompt_bytes",
               "max_prompt_tokens", "retries", "retry_backoff", "retry", "resume", "budget",
               "balance", "affinity", "queue", "cache", "prompt_cache"});
  route rt;
  rt.name = r.text("name", "route" + std::to_string(index));
  rt.paths = string_list(r, "paths");
  for (const auto& p : rt.paths)
    if (std::find(model_bearing_paths().begin(), model_bearing_paths().end(), p) ==
        model_bearing_paths().end())
      r.fail_at(r.node()["paths"], "route '" + rt.name + "': unknown path '" + p + "'");
  rt.models = string_list(r, "models");
  if (rt.models.empty()) r.fail("route '" + rt.name + "' needs 'models' (names, aliases or globs)");
  if (!r.has("targets") || !r.node()["targets"].IsSequence() || r.node()["targets"].size() == 0)
    r.fail("route '" + rt.name + "' needs at least one target");
  for (const auto& item : r.node()["targets"]) {
    reader t(item, r.file());
    t.only_keys({"upstream", "model", "weight"});
    route_target target{t.text("upstream", ""), t.text("model", ""),
                        t.integer<unsigned>("weight", 1, 0, 1'000'000)};
    if (!c.upstreams.count(target.upstream))
      t.fail("route '" + rt.name + "' names unknown upstream '" + target.upstream + "'");
    rt.targets.push_back(std::move(target));
  }
  if (r.has("max_output_tokens")) rt.limits = read_token_limits(r.child("max_output_tokens"));
  rt.max_prompt_bytes = r.integer<std::size_t>("max_prompt_bytes", 0, 0, 1LL << 32);
  rt.max_prompt_tokens = r.integer<std::size_t>("max_prompt_tokens", 0, 0, 100'000'000);
  rt.retries = r.integer<int>("retries", -1, -1, 100);
  rt.retry_backoff = r.time("retry_backoff", rt.retry_backoff);
  if (r.has("retry")) rt.retry = read_retry(r.child("retry"));
  if (r.has("resume")) rt.resume = read_resume(r.child("resume"));
  if (r.has("budget")) rt.budget = read_budget(r.child("budget"));
  read_route_fleet(r, rt);
  if (r.has("cache")) rt.cache = read_route_cache(r.child("cache"), rt.name);
  if (r.has("prompt_cache")) rt.prompt_cache = read_prompt_cache(r.child("prompt_cache"));
  return rt;
}

client_key read_key(const reader& r) {
  r.only_keys({"name", "sha256", "models", "max_output_tokens", "budget", "priority"});
  client_key k;
  k.name = r.text("name", "");
  if (k.name.empty()) r.fail("a key needs a 'name'");
  k.sha256 = r.text("sha256", "");
  bool hex = k.sha256.size() == 64;
  for (char& ch : k.sha256) {
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    hex = hex && std::isxdigit(static_cast<unsigned char>(ch));
  }
  if (!hex)
    r.fail("key '" + k.name +
           "' needs 'sha256': 64 hex digits (make them with `tokengate hash-key`)");
  k.models = string_list(r, "models");
  if (r.has("max_output_tokens"))
    k.max_output_tokens = r.integer<long long>("max_output_tokens", 0, 1, 10'000'000);
  if (r.has("budget")) k.budget = read_budget(r.child("budget"));
  k.priority = read_priority(r);
  return k;
}

demo_engine_settings read_demo_engine(const reader& r) {
  r.only_keys({"address", "port", "prefill_base", "prefill_ms_per_1k_tokens",
               "decode_tokens_per_second", "default_output_tokens", "honour_limit", "fail_status",
               "fail_retry_after", "context_tokens", "slots", "kv_tokens", "step_ms_per_sequence",
               "chunked_prefill_tokens", "apis", "prompt_cache_min_tokens", "prompt_cache_ttl"});
  demo_engine_settings d;
  if (r.has("apis")) d.apis = read_apis(r, "apis");
  d.fail_status = r.integer<int>("fail_status", 0, 0, 599);
  d.fail_retry_after = r.integer<int>("fail_retry_after", 1, -1, 86'400);
  d.context_tokens = r.integer<long long>("context_tokens", 0, 0, 100'000'000);
  d.honour_limit = r.text("honour_limit", d.honour_limit);
  if (d.honour_limit != "any" && d.honour_limit != "max_tokens" &&
      d.honour_limit != "max_completion_tokens")
    r.fail_at(r.node()["honour_limit"],
              "honour_limit must be any, max_tokens or max_completion_tokens");
  d.address = r.text("address", d.address);
  d.port = r.integer<std::uint16_t>("port", d.port, 0, 65535);
  d.prefill_base = r.time("prefill_base", d.prefill_base);
  d.prefill_ms_per_1k_tokens =
      r.number("prefill_ms_per_1k_tokens", d.prefill_ms_per_1k_tokens, 0, 1e6);
  d.decode_tokens_per_second =
      r.number("decode_tokens_per_second", d.decode_tokens_per_second, 0.01, 1e6);
  d.default_output_tokens =
      r.integer<int>("default_output_tokens", d.default_output_tokens, 1, 1 << 20);
  d.slots = r.integer<int>("slots", d.slots, 0, 4096);
  d.kv_tokens = r.integer<long long>("kv_tokens", d.kv_tokens, 16, 1LL << 32);
  d.step_ms_per_sequence = r.number("step_ms_per_sequence", d.step_ms_per_sequence, 0, 1000);
  d.chunked_prefill_tokens =
      r.integer<long long>("chunked_prefill_tokens", d.chunked_prefill_tokens, 0, 1LL << 32);
  d.prompt_cache_min_tokens =
      r.integer<long long>("prompt_cache_min_tokens", d.prompt_cache_min_tokens, 1, 10'000'000);
  d.prompt_cache_ttl = r.time("prompt_cache_ttl", d.prompt_cache_ttl);
  if (d.prompt_cache_ttl.count() <= 0)
    r.fail_at(r.node()["prompt_cache_ttl"], "prompt_cache_ttl must be more than 0");
  return d;
}

memory_after_burst read_after_burst(const reader& m) {
  m.only_keys({"after_burst"});
  auto after_burst = m.text("after_burst", "give_back");
  if (after_burst == "give_back") return memory_after_burst::give_back;
  if (after_burst == "lazy_free") return memory_after_burst::lazy_free;
  if (after_burst != "keep")
    m.fail_at(m.node()["after_burst"], "after_burst must be give_back, lazy_free or keep");
  return memory_after_burst::keep;
}

admin_settings read_admin(const reader& a) {
  a.only_keys({"address", "port", "token", "trace_url"});
  admin_settings s{a.text("address", "127.0.0.1"), a.integer<std::uint16_t>("port", 9090, 0, 65535),
                   a.text("token", ""), a.text("trace_url", "")};
  // (A link the status page opens: only a web address, and one that
  // names the trace, or every row would lead to the same page.)
  const auto& url = s.trace_url;
  if (!url.empty() && ((url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) ||
                       url.find("{trace_id}") == std::string::npos))
    a.fail_at(a.node()["trace_url"],
              "trace_url must be an http:// or https:// URL with {trace_id} in it");
  return s;
}

std::shared_ptr<const config> build(const YAML::Node& root_node, const std::string& file) {
  reader root(root_node, file);
  if (!root_node.IsMap()) root.fail("the top level must be a mapping");
  root.only_keys({"log_level", "workers", "drain_timeout", "listeners", "upstreams", "routes",
                  "keys", "health", "limits", "admin", "demo_engine", "memory", "prices", "redis",
                  "tracing", "cache"});
  auto c = std::make_shared<config>();
  c->source = file;
  c->log_level = root.text("log_level", c->log_level);
  static const std::set<std::string> levels{"trace", "debug",    "info", "warn",
                                            "error", "critical", "off"};
  if (!levels.count(c->log_level))
    root.fail_at(root_node["log_level"], "unknown log_level '" + c->log_level + "'");
  c->workers = root.integer<int>("workers", 0, 0, 256);
  c->drain_timeout = root.time("drain_timeout", c->drain_timeout);

  if (!root.has("upstreams") || !root_node["upstreams"].IsMap() ||
      root_node["upstreams"].size() == 0)
    root.fail("'upstreams' must be a mapping with at least one upstream");
  for (const auto& entry : root_node["upstreams"]) {
    auto name = entry.first.as<std::string>();
    c->upstreams.emplace(name, read_upstream(reader(entry.second, file), name));
  }

  if (!root.has("listeners") || !root_node["listeners"].IsSequence() ||
      root_node["listeners"].size() == 0)
    root.fail("'listeners' must be a list with at least one listener");
  std::size_t index = 0;
  for (const auto& item : root_node["listeners"]) {
    reader r(item, file);
    auto l = read_listener(r, index++);
    if (l.upstream.empty() && !root.has("routes"))
      r.fail("listener '" + l.name + "' needs an 'upstream' (or the config needs 'routes')");
    if (!l.upstream.empty() && !c->upstreams.count(l.upstream))
      r.fail_at(item["upstream"],
                "listener '" + l.name + "' names unknown upstream '" + l.upstream + "'");
    c->listeners.push_back(std::move(l));
  }

  if (root.has("routes")) {
    if (!root_node["routes"].IsSequence())
      root.fail_at(root_node["routes"], "'routes' must be a list");
    for (const auto& item : root_node["routes"])
      c->routes.push_back(read_route(reader(item, file), c->routes.size(), *c));
  }
  if (root.has("keys")) {
    if (!root_node["keys"].IsSequence()) root.fail_at(root_node["keys"], "'keys' must be a list");
    for (const auto& item : root_node["keys"]) c->keys.push_back(read_key(reader(item, file)));
  }
  if (root.has("health")) {
    auto h = root.child("health");
    h.only_keys({"eject_after", "cooldown"});
    c->health.eject_after = h.integer<int>("eject_after", c->health.eject_after, 1, 1000);
    c->health.cooldown = h.time("cooldown", c->health.cooldown);
  }
  if (root.has("limits")) read_limits(root.child("limits"), c->limits);
  if (root.has("admin")) c->admin = read_admin(root.child("admin"));
  if (root.has("prices")) c->prices = read_prices(root.child("prices"));
  if (root.has("redis")) c->redis = read_redis(root.child("redis"));
  if (root.has("tracing")) c->tracing = read_tracing(root.child("tracing"));
  check_budgets(root, *c);
  check_fleet(root, *c);
  check_prompt_caches(root, *c);
  if (root.has("cache")) read_cache_store(root.child("cache"), *c);
  check_caches(root, *c);
  if (root.has("demo_engine")) c->demo_engine = read_demo_engine(root.child("demo_engine"));
  if (root.has("memory")) c->after_burst = read_after_burst(root.child("memory"));
  return c;
}

}  // namespace

namespace {
constexpr std::array<std::string_view, 5> api_spellings{"chat_completions", "completions",
                                                        "responses", "messages", "embeddings"};
}  // namespace

std::optional<api> api_named(std::string_view name) {
  for (std::size_t i = 0; i < api_spellings.size(); ++i)
    if (api_spellings[i] == name) return static_cast<api>(i);
  return std::nullopt;
}

std::string_view name_of(api a) { return api_spellings[static_cast<std::size_t>(a)]; }

std::string api_names(api_set set) {
  std::string out;
  for (std::size_t i = 0; i < api_spellings.size(); ++i)
    if (set.has(static_cast<api>(i))) out.append(out.empty() ? "" : ", ").append(api_spellings[i]);
  return out;
}

api_set served_apis(const upstream& u) {
  if (u.apis) return *u.apis;
  switch (u.kind) {
    case provider_kind::openai:
      return api_set()
          .add(api::chat_completions)
          .add(api::completions)
          .add(api::responses)
          .add(api::embeddings);
    case provider_kind::anthropic:
      return api_set().add(api::messages);
    case provider_kind::any:
      break;
  }
  return api_set::all();
}

bool has_budgets(const config& c) {
  return std::any_of(c.keys.begin(), c.keys.end(), [](const auto& k) { return k.budget.any(); }) ||
         std::any_of(c.routes.begin(), c.routes.end(),
                     [](const auto& r) { return r.budget.any(); });
}

bool has_caches(const config& c) {
  return std::any_of(c.routes.begin(), c.routes.end(), [](const auto& r) { return r.cache; });
}

std::shared_ptr<const config> load_config_text(std::string_view yaml, std::string source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    throw config_error(source_name + ':' + std::to_string(e.mark.line + 1) + ':' +
                       std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  try {
    return build(root, source_name);
  } catch (const YAML::Exception& e) {  // e.g. a scalar where a map was expected
    throw config_error(source_name + ':' + std::to_string(e.mark.line + 1) + ':' +
                       std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

std::shared_ptr<const config> load_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw config_error(path + ": cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  return load_config_text(text.str(), path);
}

std::shared_ptr<const config> load_embedded_config() {
  return load_config_text(embedded_default_config, "<embedded config/tokengate.yaml>");
}

}  // namespace tokengate::config
