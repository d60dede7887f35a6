#include "cli/commands.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <csignal>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>

#include "bench/bench.hpp"
#include "cli/probe.hpp"
#include "config/config.hpp"
#include "engine/demo_engine.hpp"
#include "routing/policy.hpp"
#include "server/allocator.hpp"
#include "server/connection_gate.hpp"
#include "server/server.hpp"

namespace tokengate::cli {
namespace {

constexpr const char* usage =
    "usage: tokengate <command> [options]\n"
    "\n"
    "commands:\n"
    "  serve [-c FILE] [--log-level LEVEL]   run the proxy (default: the embedded config)\n"
    "  check -c FILE                         validate a config file and exit\n"
    "  hash-key [KEY]                        SHA-256 of a client key for `keys:` (reads stdin "
    "without KEY)\n"
    "  demo-engine [--address A] [--port N] [--decode-tps X] [--prefill-ms-per-1k X]\n"
    "              [--output-tokens N]       run the simulated LLM on its own; with\n"
    "              [--slots N [--kv-tokens N] [--step-ms-per-sequence X]\n"
    "              [--chunked-prefill-tokens N]]  an engine's batching, KV budget,\n"
    "                                        queue, prefix cache and chunked prefill\n"
    "              [--apis chat_completions,...]  serve only these APIs (the others'\n"
    "                                        paths answer 404, as llama.cpp's server does)\n"
    "              [--prompt-cache-min-tokens N]  the shortest prefix a cache_control\n"
    "                                        breakpoint caches on /v1/messages (1024)\n"
    "  bench --url URL [--api openai|responses|anthropic] [--model M] [--key-env VAR] [--requests "
    "N]\n"
    "        [--concurrency 1,8,32] [--prompt-tokens 100,1000,4000] [--max-tokens N]\n"
    "        [--prompt-script latin|cyrillic|han|code] [--escape-non-ascii]\n"
    "        [--extra-body JSON] [--header 'NAME: VALUE']... [--key-header NAME]\n"
    "        [--timeout SECONDS] [--ramp-up SECONDS] [--json]\n"
    "                                        TTFT, inter-token latency, TPOT, tokens/s at "
    "p50/p95/p99\n"
    "                                        (--json: also each request's TTFT, ttft_ms_each)\n"
    "  probe URL                             GET an http URL (e.g. /healthz); exit 0 on 2xx (3 s "
    "deadline)\n"
    "  version                               print the version\n";

struct options {
  std::string command;
  std::optional<std::string> config_file;
  std::optional<std::string> log_level;
  std::vector<std::pair<std::string, std::string>> named;  // other --key value pairs
};

std::optional<options> parse(const std::vector<std::string>& args, std::string& error) {
  options o;
  if (args.empty()) {
    error = "missing command";
    return std::nullopt;
  }
  o.command = args[0];
  for (std::size_t i = 1; i < args.size(); ++i) {
    const auto& a = args[i];
    if (i + 1 >= args.size()) {
      error = "option " + a + " needs a value";
      return std::nullopt;
    }
    const auto& value = args[++i];
    if (a == "-c" || a == "--config")
      o.config_file = value;
    else if (a == "--log-level")
      o.log_level = value;
    else if (a.rfind("--", 0) == 0)
      o.named.emplace_back(a.substr(2), value);
    else {
      error = "unexpected argument " + a;
      return std::nullopt;
    }
  }
  return o;
}

void setup_logging(const std::string& level) {
  auto logger = spdlog::stdout_color_mt("tokengate");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::flush_on(spdlog::level::info);
}

std::shared_ptr<const config::config> load(const options& o) {
  return o.config_file ? config::load_config_file(*o.config_file) : config::load_embedded_config();
}

// Blocks until SIGINT or SIGTERM.
void wait_for_stop_signal() {
  net::io_context io(1);
  net::signal_set signals(io, SIGINT, SIGTERM);
  int received = 0;
  signals.async_wait([&](const error_code&, int sig) { received = sig; });
  io.run();
  spdlog::info("received {}, draining", received == SIGTERM ? "SIGTERM" : "SIGINT");
}

// The file's log_level from now on, unless --log-level set it: spdlog's
// level is one atomic that every thread reads before it logs, so turning
// the access log (info) on or off needs no restart.
void reload_log_level(const config::config& previous, const config::config& next,
                      bool level_from_command_line) {
  if (next.log_level == previous.log_level) return;
  if (level_from_command_line) {
    spdlog::warn("reload: log_level {} in the file, but --log-level on the command line wins",
                 next.log_level);
    return;
  }
  // (said at info, before the switch or after it, whichever level shows it)
  auto level = spdlog::level::from_str(next.log_level);
  bool louder = level < spdlog::get_level();
  if (!louder) spdlog::info("reload: log level {} from now on", next.log_level);
  spdlog::set_level(level);
  if (louder) spdlog::info("reload: log level {} from now on", next.log_level);
}

// Reloads the policy from `file`: parse and validate first; a bad file is
// refused with file:line:column and the running policy stays.
void reload_policy(server& srv, const std::string& file, bool level_from_command_line) {
  try {
    auto next = config::load_config_file(file);
    auto previous = srv.current_config();
    std::string waiting;
    for (const auto& name : srv.reload(next)) waiting += (waiting.empty() ? "" : ", ") + name;
    if (!waiting.empty())
      spdlog::warn("reload: changed since start, in effect only after a restart: {}", waiting);
    spdlog::info("reload: policy from {} is in effect ({} routes, {} upstreams)", file,
                 next->routes.size(), next->upstreams.size());
    reload_log_level(*previous, *next, level_from_command_line);
    for (const auto& w : next->warnings) spdlog::warn("reload: {}", w);
  } catch (const std::exception& e) {
    srv.count_failed_reload(e.what());
    spdlog::error("reload refused, the running policy stays: {}", e.what());
  }
}

// Serves until SIGINT/SIGTERM. SIGHUP reloads the policy and every TLS
// certificate; a change of the config file's modification time reloads the
// policy, and a change of a certificate or key file that certificate
// (both checked every second).
void run_until_stopped(server& srv, const std::optional<std::string>& file,
                       bool level_from_command_line, net::io_context& io,
                       net::signal_set& signals) {
  namespace fs = std::filesystem;
  net::steady_timer watch(io);
  std::error_code fs_error;
  auto last_write = file ? fs::last_write_time(*file, fs_error) : fs::file_time_type{};
  std::function<void()> arm_watch = [&] {
    watch.expires_after(std::chrono::seconds(1));
    watch.async_wait([&](const error_code& ec) {
      if (ec) return;
      std::error_code e;
      auto now = file ? fs::last_write_time(*file, e) : fs::file_time_type{};
      if (file && !e && now != last_write) {
        last_write = now;
        spdlog::info("reload: {} changed", *file);
        reload_policy(srv, *file, level_from_command_line);
      }
      srv.reload_certificates(true);
      srv.release_memory_after_burst();
      srv.release_unused_body_buffers();
      srv.close_stale_pooled_connections();
      arm_watch();
    });
  };
  arm_watch();
  std::function<void()> arm_signals = [&] {
    signals.async_wait([&](const error_code& ec, int sig) {
      if (ec) return;
      if (sig == SIGHUP) {
        if (file)
          reload_policy(srv, *file, level_from_command_line);
        else
          spdlog::info("SIGHUP: running on the embedded config, no policy to reload");
        srv.reload_certificates(false);
        arm_signals();
        return;
      }
      spdlog::info("received {}, draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      watch.cancel();
      io.stop();
    });
  };
  arm_signals();
  io.run();
}

int serve(const options& o) {
  // Signals are caught from the first moment: a SIGHUP or SIGTERM that comes
  // while listeners are still opening waits for the loop below instead of
  // killing the process with the default action.
  net::io_context control(1);
  net::signal_set signals(control, SIGINT, SIGTERM, SIGHUP);
  auto cfg = load(o);
  setup_logging(o.log_level.value_or(cfg->log_level));
  for (const auto& w : cfg->warnings) spdlog::warn("{}", w);
  // (Before any thread that serves allocates: mimalloc 2.0 reads its switch
  // as it takes each segment of memory from the system.)
  if (cfg->after_burst == config::memory_after_burst::keep) keep_freed_memory();
  if (cfg->after_burst == config::memory_after_burst::lazy_free) free_memory_lazily();
  std::unique_ptr<engine::demo_engine> demo;
  if (cfg->demo_engine) {
    demo = std::make_unique<engine::demo_engine>(*cfg->demo_engine);
    demo->start();
    spdlog::info("demo engine listening on http://{}:{}/v1", cfg->demo_engine->address,
                 demo->port());
  }
  auto descriptors = raise_descriptor_limit();
  server srv(cfg);
  srv.start();
  spdlog::info(
      "at most {} client connections at once (limits.max_connections{}; descriptor limit {}); "
      "heap: {}",
      srv.max_connections(), cfg->limits.max_connections ? "" : ": half the descriptor limit",
      descriptors, allocator_name());
  for (const auto& l : cfg->listeners) {
    spdlog::info("tokengate {} listening on {}://{}:{}/v1 (listener '{}', {}, {} workers)",
                 TOKENGATE_VERSION, l.tls ? "https" : "http", l.address, srv.port(l.name), l.name,
                 cfg->routes.empty() ? "upstream '" + l.upstream + "'"
                                     : std::to_string(cfg->routes.size()) + " routes by model",
                 srv.worker_count());
  }
  if (cfg->admin)
    spdlog::info("metrics at http://{}:{}/metrics, health at /healthz and /readyz",
                 cfg->admin->address, srv.admin_port());
  const auto& first = cfg->listeners.front();
  std::cout << "\nSend requests to " << (first.tls ? "https" : "http") << "://" << first.address
            << ':' << srv.port(first.name) << "/v1, e.g.\n  curl -N "
            << (first.tls ? "https" : "http") << "://" << first.address << ':'
            << srv.port(first.name)
            << "/v1/chat/completions -H 'content-type: application/json' "
               "-d "
               "'{\"model\":\"demo\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
               "\"hi\"}]}'\n"
            << std::endl;
  run_until_stopped(srv, o.config_file, o.log_level.has_value(), control, signals);
  srv.drain_and_stop();
  if (demo) demo->stop();
  spdlog::info("stopped");
  return 0;
}

int check(const options& o) {
  if (!o.config_file) {
    std::cerr << "tokengate check: -c FILE is required\n";
    return 2;
  }
  auto cfg = config::load_config_file(*o.config_file);
  for (const auto& w : cfg->warnings) std::cerr << "warning: " << w << "\n";
  std::cout << *o.config_file << ": ok (" << cfg->listeners.size() << " listeners, "
            << cfg->upstreams.size() << " upstreams"
            << (cfg->warnings.empty() ? ""
                                      : ", " + std::to_string(cfg->warnings.size()) + " warnings")
            << ")\n";
  return 0;
}

double number_option(const options& o, const std::string& name, double fallback) {
  for (const auto& [k, v] : o.named) {
    if (k != name) continue;
    double d = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
    if (ec != std::errc{} || p != v.data() + v.size())
      throw std::runtime_error("--" + name + ": not a number: " + v);
    return d;
  }
  return fallback;
}

// --apis chat_completions,responses: the APIs the demo engine serves.
config::api_set apis_option(const std::string& list) {
  config::api_set set;
  std::string_view rest = list;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    auto name = rest.substr(0, comma);
    auto a = config::api_named(name);
    if (!a)
      throw std::runtime_error("--apis: unknown API '" + std::string(name) +
                               "' (expected a comma-separated list of " + config::api_names() +
                               ")");
    set.add(*a);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  if (set.bits == 0) throw std::runtime_error("--apis: name at least one API");
  return set;
}

int demo_engine_command(const options& o) {
  setup_logging(o.log_level.value_or("info"));
  config::demo_engine_settings settings;
  settings.port = 9901;
  for (const auto& [k, v] : o.named) {
    if (k == "address")
      settings.address = v;
    else if (k == "apis")
      settings.apis = apis_option(v);
    else if (k != "port" && k != "decode-tps" && k != "prefill-ms-per-1k" && k != "output-tokens" &&
             k != "slots" && k != "kv-tokens" && k != "step-ms-per-sequence" &&
             k != "chunked-prefill-tokens" && k != "prompt-cache-min-tokens")
      throw std::runtime_error("unknown option --" + k);
  }
  settings.port = static_cast<std::uint16_t>(number_option(o, "port", settings.port));
  settings.decode_tokens_per_second =
      number_option(o, "decode-tps", settings.decode_tokens_per_second);
  settings.prefill_ms_per_1k_tokens =
      number_option(o, "prefill-ms-per-1k", settings.prefill_ms_per_1k_tokens);
  settings.default_output_tokens =
      static_cast<int>(number_option(o, "output-tokens", settings.default_output_tokens));
  settings.slots = static_cast<int>(number_option(o, "slots", settings.slots));
  settings.kv_tokens = static_cast<long long>(
      number_option(o, "kv-tokens", static_cast<double>(settings.kv_tokens)));
  settings.step_ms_per_sequence =
      number_option(o, "step-ms-per-sequence", settings.step_ms_per_sequence);
  settings.chunked_prefill_tokens = static_cast<long long>(number_option(
      o, "chunked-prefill-tokens", static_cast<double>(settings.chunked_prefill_tokens)));
  settings.prompt_cache_min_tokens = static_cast<long long>(number_option(
      o, "prompt-cache-min-tokens", static_cast<double>(settings.prompt_cache_min_tokens)));
  if (settings.prompt_cache_min_tokens < 1)
    throw std::runtime_error("--prompt-cache-min-tokens: at least 1");
  engine::demo_engine demo(settings);
  demo.start();
  spdlog::info("demo engine listening on http://{}:{}/v1", settings.address, demo.port());
  std::cout << "PORT " << demo.port() << std::endl;  // for scripts that asked for port 0
  wait_for_stop_signal();
  demo.stop();
  return 0;
}

int hash_key(const std::vector<std::string>& args) {
  std::string key;
  if (args.size() > 1)
    key = args[1];
  else
    std::getline(std::cin, key);  // from stdin, so the key stays out of shell history
  if (key.empty()) {
    std::cerr << "tokengate hash-key: no key given\n";
    return 2;
  }
  std::cout << routing::sha256_hex(key) << '\n';
  return 0;
}

}  // namespace

std::vector<int> int_list(const std::string& name, const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    int v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc{} || p != item.data() + item.size() || v < 1)
      throw std::runtime_error(
          "--" + name + ": expected positive integers separated by commas, got '" + text + "'");
    out.push_back(v);
  }
  if (out.empty()) throw std::runtime_error("--" + name + " is empty");
  return out;
}

int bench_command(const std::vector<std::string>& args) {
  bench::options o;
  o.progress = ::isatty(STDERR_FILENO) != 0;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    }
    if (a == "--json") {
      o.json = true;
      continue;
    }
    if (a == "--escape-non-ascii") {
      o.escape_non_ascii = true;
      continue;
    }
    if (i + 1 >= args.size()) throw std::runtime_error("option " + a + " needs a value");
    const auto& v = args[++i];
    if (a == "--url")
      o.url = v;
    else if (a == "--api")
      o.api = v;
    else if (a == "--model")
      o.model = v;
    else if (a == "--key-env")
      o.key_env = v;
    else if (a == "--key-header")
      o.key_header = v;
    else if (a == "--header")
      o.headers.push_back(bench::parse_header(v));
    else if (a == "--requests")
      o.requests = int_list("requests", v).front();
    else if (a == "--concurrency")
      o.concurrency = int_list("concurrency", v);
    else if (a == "--prompt-tokens")
      o.prompt_tokens = int_list("prompt-tokens", v);
    else if (a == "--max-tokens")
      o.max_tokens = int_list("max-tokens", v).front();
    else if (a == "--extra-body")
      o.extra_body = v;
    else if (a == "--prompt-script")
      o.prompt_script = v;
    else if (a == "--timeout")
      o.timeout = std::chrono::seconds(int_list("timeout", v).front());
    else if (a == "--ramp-up")
      o.ramp_up = std::chrono::seconds(int_list("ramp-up", v).front());
    else
      throw std::runtime_error("unknown bench option " + a);
  }
  if (o.json) o.progress = false;
  auto results = bench::run(o);
  std::cout << (o.json ? bench::render_json(results) + "\n" : bench::render_table(results))
            << std::flush;
  // Nothing measured at a point is a failed run, for scripts as for people.
  int status = 0;
  for (const auto& r : results)
    if (r.ok == 0) {
      std::cerr << "tokengate bench: no request succeeded at concurrency " << r.concurrency
                << ", prompt " << r.prompt_tokens << " tokens\n";
      status = 1;
    }
  return status;
}

int run(const std::vector<std::string>& args) {
  tune_allocator();  // (serve, bench and demo-engine all open and close thousands of connections)
  if (!args.empty() && args[0] == "hash-key") return hash_key(args);
  if (!args.empty() && args[0] == "probe") {
    if (args.size() != 2) {
      std::cerr << "usage: tokengate probe http://HOST:PORT/PATH\n";
      return 2;
    }
    return probe(args[1], std::chrono::seconds(3));
  }
  if (!args.empty() && args[0] == "bench") {
    try {
      return bench_command(args);
    } catch (const std::exception& e) {
      std::cerr << "tokengate bench: " << e.what() << '\n';
      return 2;
    }
  }
  std::string error;
  auto o = parse(args, error);
  if (!o) {
    std::cerr << "tokengate: " << error << "\n\n" << usage;
    return 2;
  }
  try {
    if (o->command == "serve") return serve(*o);
    if (o->command == "check") return check(*o);
    if (o->command == "demo-engine") return demo_engine_command(*o);
    if (o->command == "version") {
      std::cout << "tokengate " << TOKENGATE_VERSION << " (heap: " << allocator_name() << ")\n";
      return 0;
    }
    if (o->command == "help" || o->command == "--help" || o->command == "-h") {
      std::cout << usage;
      return 0;
    }
    std::cerr << "tokengate: unknown command '" << o->command << "'\n\n" << usage;
    return 2;
  } catch (const config::config_error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tokengate: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace tokengate::cli
