#pragma once
// The validated, immutable configuration. Built once by load_config(); every
// request reads it through a std::shared_ptr<const config> snapshot.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config/duration.hpp"

namespace tokengate::config {

struct tls_files {
  std::string cert_file;
  std::string key_file;
  bool operator==(const tls_files&) const = default;
};

struct listener {
  std::string name;
  std::string address = "127.0.0.1";
  std::uint16_t port = 8080;
  std::optional<tls_files> tls;
  // Without routes: every request goes to this upstream. With routes: only
  // requests no route applies to (none today), so it may be left out.
  std::string upstream;
};

// The API an upstream speaks. `any`: whatever the client speaks goes as it
// is (an engine serving both, like the demo engine or llama.cpp's server).
// `openai` / `anthropic`: that API only; a client speaking the other one
// is translated (translate/).
enum class provider_kind { any, openai, anthropic };

// The APIs an upstream serves (its `apis:`, by the paths clients call):
// llama.cpp's server, Ollama, TGI and older vLLM serve chat completions
// alone, and a request in another API is translated for them where a
// translation exists (translate/translation.hpp).
enum class api { chat_completions, completions, responses, messages, embeddings };
struct api_set {
  unsigned bits = 0;
  static api_set all() { return {(1u << 5) - 1}; }
  bool has(api a) const { return (bits >> static_cast<unsigned>(a)) & 1u; }
  api_set& add(api a) {
    bits |= 1u << static_cast<unsigned>(a);
    return *this;
  }
  bool operator==(const api_set&) const = default;
};
// `chat_completions` → api::chat_completions; nothing for an unknown name.
std::optional<api> api_named(std::string_view name);
std::string_view name_of(api a);
// "chat_completions, completions, responses, messages, embeddings"
std::string api_names(api_set set = api_set::all());

// The spelling of an OpenAI-style output limit an engine honours.
// llama.cpp's server ignores max_completion_tokens; OpenAI's reasoning
// models refuse max_tokens. `keep` sends the client's own spelling.
enum class limit_field { keep, max_tokens, max_completion_tokens };

struct upstream_timeouts {
  duration connect{std::chrono::seconds(5)};
  duration first_byte{std::chrono::seconds(120)};  // covers prefill of long prompts
  duration idle{std::chrono::seconds(60)};         // longest gap between two chunks
  // Request sent → an event stream's first content event; until then the
  // client is sent nothing, and past it the next target is tried
  // (stream/relay.cpp). 0 = off.
  duration first_token{0};
  duration total{std::chrono::minutes(15)};
  // An idle keep-alive connection's longest wait in the pool (nginx's
  // upstream keepalive_timeout, with its default); 0 = until the upstream
  // closes it.
  duration pooled{std::chrono::seconds(60)};
};

// fleet/: what one engine can take at once, as declared. A request that
// would exceed it waits in its route's queue (route::queue) or goes to
// another target.
struct upstream_capacity {
  int max_streams = 0;               // requests at once (the engine's slots); 0 = no bound
  long long max_context_tokens = 0;  // one request's prompt + output; 0 = no bound
  long long kv_tokens = 0;           // its KV cache (balance: fastest's index); 0 = 2M
  // Prompt tokens in prefill at once: sent there, first token not back
  // (the uncached share under balance: fastest); 0 = no bound.
  long long max_prefill_tokens = 0;
  // Whether a request may have to wait for room there.
  bool bounds_admission() const { return max_streams > 0 || max_prefill_tokens > 0; }
  bool operator==(const upstream_capacity&) const = default;
};
// Active health checks: a GET every `interval`; `unhealthy_after` failures
// in a row take the upstream out of rotation, `healthy_after` successes
// bring it back.
struct health_check_settings {
  std::string path = "/health";  // on the upstream's host (not under base_url's path)
  duration interval{std::chrono::seconds(2)};
  duration timeout{std::chrono::seconds(1)};
  int unhealthy_after = 2;
  int healthy_after = 2;
  bool operator==(const health_check_settings&) const = default;
};
// The engine's own load (vLLM, SGLang, TGI, llama.cpp Prometheus text),
// read every `interval` off the request path.
struct engine_metrics_settings {
  std::string path = "/metrics";
  duration interval{std::chrono::seconds(1)};
  bool operator==(const engine_metrics_settings&) const = default;
};

struct upstream {
  std::string name;
  std::string base_url;  // e.g. https://api.openai.com/v1
  provider_kind kind = provider_kind::any;
  std::string api_key;  // already expanded from ${ENV}; empty = pass client's own
  std::string ca_file;  // empty = system trust store
  upstream_timeouts timeouts;
  std::size_t pool_size = 64;              // idle keep-alive connections kept per worker
  std::size_t max_concurrent_streams = 0;  // per worker; 0 = no limit
  limit_field limit_spelling = limit_field::keep;
  upstream_capacity capacity;
  std::optional<health_check_settings> health_check;
  std::optional<engine_metrics_settings> engine_metrics;
  // `apis:` as configured; without it, its kind's (served_apis).
  std::optional<api_set> apis;
};

// What an upstream serves: its `apis:`, else what its kind means: `any`
// all of them as sent, `openai` all but messages (OpenAI itself),
// `anthropic` messages alone.
api_set served_apis(const upstream& u);

enum class limit_mode { clamp, reject };

struct token_limits {
  std::optional<long long> default_output;  // injected when the request sets none
  std::optional<long long> ceiling;         // the most a request may ask for
  limit_mode mode = limit_mode::clamp;
};

// What a key, or a route, may take (budget/ holds them): each limit is
// optional, and a request must fit every one that is set. Windows are
// aligned to UTC: the minute, the day, the calendar month.
struct budget_limits {
  std::optional<long long> requests_per_minute;
  std::optional<long long> tokens_per_minute;  // input + output
  std::optional<long long> tokens_per_day;
  std::optional<long long> concurrent_streams;  // requests in flight, streamed or not
  std::optional<double> usd_per_day;            // needs `prices` for the models
  std::optional<double> usd_per_month;
  bool any() const {
    return requests_per_minute || tokens_per_minute || tokens_per_day || concurrent_streams ||
           usd_per_day || usd_per_month;
  }
};
struct route_target {
  std::string upstream;
  std::string model;  // the name sent upstream; empty = the client's own
  unsigned weight = 1;
};

// How a route picks among its healthy targets (fleet/picker.hpp).
enum class balance_mode {
  least_loaded,     // power of two choices by in-flight tokens per weight
  weighted_random,  // by weight alone
  fastest,          // the least predicted time to first token (fleet/ttft_model.hpp)
};
// Prefix affinity: a conversation's start picks its target by rendezvous
// hashing, so its KV cache is reused, unless that target carries more than
// `max_load_ratio` times the route's mean load.
struct affinity_settings {
  std::size_t prefix_bytes = 4096;  // of the conversation's first messages
  double max_load_ratio = 1.25;
  // With a queue: how long a conversation whose replica is full waits for
  // a slot there before it takes one elsewhere (and prefills its history
  // again). 0: elsewhere at once.
  duration hold{0};
};
// Admission: a request no target has room for (upstream_capacity) waits
// here, highest priority first, FIFO within a priority, at most `timeout`.
struct queue_settings {
  std::size_t max_waiting = 256;
  duration timeout{0};
};

// How an attempt that failed before anything reached the client is tried
// again on the same target, before the next one (upstream/retry_policy.hpp).
struct retry_settings {
  int same_target = 1;   // a 5xx, or a reset before the head: tried once more there
  int rate_limited = 2;  // a 429: tried again there after its Retry-After (or a backoff)
  duration retry_after_cap{std::chrono::seconds(5)};  // a longer Retry-After: the next target
  // The most same-target retries this worker sends one upstream per window:
  // past it, a failure moves on (a struggling target is not hammered).
  int per_target = 20;
  duration per_target_window{std::chrono::seconds(1)};
  bool operator==(const retry_settings&) const = default;
};

// A stream whose upstream fails after content reached the client, continued
// from another attempt (docs/configuration.md, "Resuming a stream").
// restart: the request again, its output held back until it has caught up
// with what the client has. prefill: the request with what the client has
// as a final assistant message, to be continued (restart where the target
// refuses it, or its API has no such message).
enum class resume_mode { off, restart, prefill };
struct resume_settings {
  resume_mode mode = resume_mode::off;
  int max_resumes = 2;                   // per request
  std::size_t buffer_bytes = 64 * 1024;  // the most delivered text kept per stream
  bool operator==(const resume_settings&) const = default;
};

// cache/: a route's response cache. Off unless the route has `cache:`.
enum class cache_mode { deterministic, always };
enum class cache_scope { key, route };
struct cache_settings {
  duration ttl{0};                            // required: an entry older than this is gone
  std::size_t max_entry_bytes = 1024 * 1024;  // an answer larger than this is not kept
  cache_mode mode = cache_mode::deterministic;
  cache_scope scope = cache_scope::key;
  bool paced = false;      // pace: original: a hit streams at the original's pace
  bool bill_hits = false;  // a hit counts the stored usage's tokens and dollars too
};

// `prompt_cache:` on a route (translate/prompt_cache.hpp): where its
// requests are translated for Anthropic's Messages API, `auto` places
// cache breakpoints for the client, who cannot (OpenAI's APIs have none);
// only prefixes of at least `min_tokens` (estimated) get one, Anthropic's
// smallest cacheable prompt for most models.
struct prompt_cache_settings {
  bool automatic = false;
  long long min_tokens = 1024;
};

struct route {
  std::string name;
  std::vector<std::string> paths;   // API paths it serves; empty = all that carry a model
  std::vector<std::string> models;  // exact names, aliases or globs (`gpt-4o*`, `claude-*`)
  std::vector<route_target> targets;
  token_limits limits;
  std::size_t max_prompt_bytes = 0;   // 0 = only limits.max_body_bytes
  std::size_t max_prompt_tokens = 0;  // estimated as bytes / 4; 0 = none
  int retries = -1;                   // extra attempts on fallback; -1 = one per other target
  duration retry_backoff{std::chrono::milliseconds(25)};
  retry_settings retry;
  resume_settings resume;
  budget_limits budget;  // the route's total, every key's requests together
  balance_mode balance = balance_mode::least_loaded;
  std::optional<affinity_settings> affinity;
  std::optional<queue_settings> queue;
  std::optional<cache_settings> cache;
  prompt_cache_settings prompt_cache;
};

struct model_price {
  double input_per_million = 0;  // USD per million input tokens
  double output_per_million = 0;
  // Input read from a provider's prompt cache, and input written to it
  // (Anthropic's cache_creation_input_tokens): unset, at the input price.
  std::optional<double> cached_input_per_million;
  std::optional<double> cache_write_per_million;
};
enum class store_failure_mode { deny, allow_local };
// `redis:`: where budgets are shared by every instance. Without it each
// process keeps its own.
struct redis_settings {
  std::string host;
  std::uint16_t port = 6379;
  std::string password;  // from redis://:PASSWORD@host:port; never logged
  int database = 0;
  duration timeout{std::chrono::milliseconds(5)};  // the most a request waits for it
  store_failure_mode on_failure = store_failure_mode::deny;
  int replicas = 1;  // instances sharing it: allow_local divides the limits by this
  std::string key_prefix = "tokengate";
  bool operator==(const redis_settings&) const = default;
};
// trace/: OpenTelemetry spans for each request, exported over OTLP/HTTP
// (JSON) from a background batcher.
struct tracing_settings {
  std::string endpoint;                                      // http(s)://collector:4318/v1/traces
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. an API key, from ${ENV}
  std::string ca_file;
  double sampling_ratio = 1.0;  // of traces started here; a client's traceparent decides its own
  std::string service_name = "tokengate";
  std::string service_instance_id;                            // empty: host name and process id
  std::vector<std::pair<std::string, std::string>> resource;  // more resource attributes
  std::size_t queue_spans = 8192;  // spans waiting for export; more are dropped (and counted)
  std::size_t batch_spans = 512;   // spans per export request
  duration export_interval{std::chrono::seconds(1)};
  duration timeout{std::chrono::seconds(5)};  // one export request
  int retries = 3;                            // per batch, with backoff, before it is dropped
  bool operator==(const tracing_settings&) const = default;
};
struct client_key {
  std::string name;
  std::string sha256;               // hex of the key; the key itself is never stored
  std::vector<std::string> models;  // globs it may use; empty = all
  std::optional<long long> max_output_tokens;
  budget_limits budget;  // the key's own, across every route
  int priority = 1;      // in admission queues: 0 high, 1 normal, 2 low
};

struct health_settings {
  int eject_after = 5;  // consecutive connect errors / 5xx
  duration cooldown{std::chrono::seconds(30)};
};

struct limit_settings {
  std::size_t max_head_bytes = 16 * 1024;
  std::size_t max_header_count = 100;
  std::size_t max_body_bytes = 8 * 1024 * 1024;
  duration head_timeout{std::chrono::seconds(10)};  // slowloris guard
  // A TLS client's handshake, on its own clock before the head's (the
  // handshake was bounded by head_timeout before it had a bound of its own,
  // hence the same default).
  duration tls_handshake_timeout{std::chrono::seconds(10)};
  duration body_timeout{std::chrono::seconds(30)};
  duration idle_timeout{std::chrono::seconds(60)};          // keep-alive wait between requests
  duration client_write_timeout{std::chrono::seconds(30)};  // a client that stops reading
  std::size_t stream_buffer_bytes = 16 * 1024;              // relay buffer per stream
  // Bodies at least this long go upstream while they arrive, once their
  // first members decide the policy (server/early_forward.hpp); 0 = never.
  std::size_t forward_early_bytes = 64 * 1024;
  std::size_t max_connections = 0;  // client connections in all; 0 = half the descriptor limit
  std::size_t max_connections_per_client = 0;  // per client address; 0 = no bound
  bool operator==(const limit_settings&) const =
      default;  // (config/reload.cpp: a change waits for a restart)
};

struct admin_settings {
  std::string address = "127.0.0.1";
  std::uint16_t port = 9090;
  // When set, every admin path but /healthz and /readyz needs
  // `Authorization: Bearer TOKEN` (/budgets shows tenants' usage).
  std::string token;
  // Where the status page links a slow request's trace: a URL with
  // {trace_id} in it (e.g. https://tempo/trace/{trace_id}); empty: no link.
  std::string trace_url;
  bool operator==(const admin_settings&) const = default;
};

struct demo_engine_settings {
  // Which limit spellings the engine honours: "any", "max_tokens" or
  // "max_completion_tokens" (to test that each upstream gets its spelling).
  std::string honour_limit = "any";
  // Answer every generation with this HTTP status (e.g. 503): an unhealthy
  // engine, to test fallback. 0 = behave.
  int fail_status = 0;
  int fail_retry_after = 1;  // … a 429's Retry-After, in seconds (-1: none)
  // The engine's context: a longer prompt is refused with the API's 400
  // (OpenAI's context_length_exceeded). 0 = none.
  long long context_tokens = 0;
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;
  duration prefill_base{std::chrono::milliseconds(20)};
  double prefill_ms_per_1k_tokens = 50;  // time to first token grows with the prompt
  double decode_tokens_per_second = 25;  // gap between tokens once decoding
  int default_output_tokens = 40;        // answer length when the request sets no limit
  // The realistic mode (engine/batch_scheduler.hpp): sequences at once
  // (0: every request on its own clock), the KV their prompts and outputs
  // may hold, and what each more sequence adds to a decode step.
  int slots = 0;
  long long kv_tokens = 65536;
  double step_ms_per_sequence = 0.4;
  // > 0: each step decodes the running sequences and prefills up to this
  // many prompt tokens beside them (vLLM's chunked prefill); 0: a prefill
  // holds every decode until it is done.
  long long chunked_prefill_tokens = 0;
  // The APIs it serves; the others' paths answer 404, as llama.cpp's
  // server answers /v1/responses.
  api_set apis = api_set::all();
  // Anthropic's prompt caching on /v1/messages (engine/prompt_cache.hpp):
  // the shortest prefix a breakpoint caches (Anthropic's 1024 for most
  // models; tests set a few), and how long an entry lives unread.
  long long prompt_cache_min_tokens = 1024;
  duration prompt_cache_ttl{std::chrono::minutes(5)};
  bool operator==(const demo_engine_settings&) const = default;
};

// memory.after_burst (docs/configuration.md):
//  give_back: freed pages go back to the system a second after they are
//    freed, and once a burst is over (MADV_DONTNEED: resident memory drops;
//    the next burst takes its pages afresh, a page fault each);
//  lazy_free: freed pages are marked free but left mapped (MADV_FREE): the
//    kernel takes them only when it needs memory, and until then the next
//    burst reuses them without faults (resident memory shows them);
//  keep: freed pages stay with the process until it exits.
enum class memory_after_burst { give_back, lazy_free, keep };

struct config {
  std::string source;  // file name, or "<embedded>"
  std::string log_level = "info";
  int workers = 0;  // 0 = one per core
  duration drain_timeout{std::chrono::seconds(30)};
  std::vector<listener> listeners;
  std::map<std::string, upstream> upstreams;
  std::vector<route> routes;                  // first match wins
  std::vector<client_key> keys;               // empty = no client authentication
  std::map<std::string, model_price> prices;  // by model name as clients send it
  std::optional<redis_settings> redis;        // read at start only
  std::optional<tracing_settings> tracing;    // the exporter: read at start only
  health_settings health;
  limit_settings limits;
  std::optional<admin_settings> admin;
  std::optional<demo_engine_settings> demo_engine;
  // `cache: {max_bytes}`: the in-process response cache's bound, every
  // route's entries together.
  std::size_t cache_max_bytes = 256 * 1024 * 1024;
  // `cache: {store: redis}`: every route's entries in the `redis:` store,
  // shared by the instances that use it (read at start only).
  bool cache_in_redis = false;
  // memory.after_burst: what the heap does with the memory a burst freed
  // (allocator.hpp). Read at start only.
  memory_after_burst after_burst = memory_after_burst::give_back;
  // Settings accepted that do nothing where they are (a setting another
  // replaced): "file:line:column: why". `check` prints them; `serve` logs
  // them at start and at each reload.
  std::vector<std::string> warnings;
};

// Whether any key or route has a budget.
bool has_budgets(const config& c);
// Whether any route has a response cache.
bool has_caches(const config& c);
// Every configuration error names the place: "file:line:column: message".
class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::shared_ptr<const config> load_config_file(const std::string& path);
std::shared_ptr<const config> load_config_text(std::string_view yaml, std::string source_name);

// The config compiled into the binary (config/tokengate.yaml at build time).
std::shared_ptr<const config> load_embedded_config();

}  // namespace tokengate::config
