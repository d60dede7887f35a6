#include "server/server.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <future>
#include <latch>

#include "budget/gate.hpp"
#include "cache/store.hpp"
#include "config/reload.hpp"
#include "fleet/board.hpp"
#include "fleet/index_sharing.hpp"
#include "fleet/prober.hpp"
#include "io/port_in_use.hpp"
#include "io/tls_credentials.hpp"
#include "metrics/cpu_wait.hpp"
#include "metrics/process_memory.hpp"
#include "metrics/prometheus_text.hpp"
#include "server/admin.hpp"
#include "server/allocator.hpp"
#include "server/connection_gate.hpp"
#include "server/worker.hpp"
#include "trace/exporter.hpp"

namespace tokengate {

server::server(std::shared_ptr<const config::config> config)
    : config_(std::move(config)), store_(std::make_shared<config_store>(config_)) {
  const auto& limits = config_->limits;
  gate_ = std::make_unique<connection_gate>(
      limits.max_connections ? limits.max_connections : default_max_connections(descriptor_limit()),
      limits.max_connections_per_client);
  budgets_ = std::make_unique<budget::budgets>(config_->redis);
  fleet_ = std::make_unique<fleet::board>();
  cache_ = std::make_unique<cache::store>(
      config_->cache_max_bytes,
      config_->cache_in_redis ? config_->redis : std::optional<config::redis_settings>());
  if (config_->tracing) tracer_ = std::make_unique<trace::exporter>(*config_->tracing);
  int count = config_->workers > 0
                  ? config_->workers
                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i < count; ++i)
    workers_.push_back(
        std::make_unique<worker>(i, store_, *gate_, *budgets_, *fleet_, *cache_, tracer_.get()));
  // Health checks and engine metrics: on the first worker's thread.
  prober_ = std::make_unique<fleet::prober>(
      *fleet_, [store = store_] { return store->snapshot(); }, workers_.front()->upstreams());
  share_the_fleet_index();
}

// Instances that share a Redis share what they sent each replica of a
// balance: fastest route (its upstreams as the config at start names them).
void server::share_the_fleet_index() {
  if (!config_->redis) return;
  std::vector<fleet::index_sharing::shared_upstream> shared;
  for (const auto& route : config_->routes) {
    if (route.balance != config::balance_mode::fastest) continue;
    for (const auto& t : route.targets)
      shared.push_back({t.upstream, config_->upstreams.at(t.upstream).capacity.kv_tokens});
  }
  if (shared.empty()) return;
  sharing_ = std::make_unique<fleet::index_sharing>(workers_.front()->io().get_executor(),
                                                    *config_->redis, *fleet_, std::move(shared));
  fleet_->share_with(sharing_.get());
}

server::~server() { drain_and_stop(); }

namespace {

// A port that another process already listens on is shared, not refused
// (SO_REUSEPORT, port_in_use.hpp): meant in a binary upgrade, a surprise
// otherwise, so it is said.
void say_if_shared(const std::string& address, std::uint16_t port, const std::string& what) {
  error_code ec;
  auto ip = net::ip::make_address(address, ec);
  if (ec || !port_already_listened({ip, port})) return;
  spdlog::warn(
      "{}:{} ({}) is already open in another process: this one shares its new connections with it "
      "(SO_REUSEPORT), as in a binary upgrade or instances side by side; if that is not meant, "
      "stop one",
      address, port, what);
}

}  // namespace

void server::start() {
  for (const auto& l : config_->listeners) {
    std::shared_ptr<tls_credentials> tls;
    if (l.tls)
      certificates_[l.name] = tls =
          std::make_shared<tls_credentials>(l.tls->cert_file, l.tls->key_file);
    std::uint16_t port = l.port;
    say_if_shared(l.address, port, "listener '" + l.name + "'");
    for (auto& w : workers_) port = w->bind(l, port, tls);  // port 0: the first bind picks it
    ports_[l.name] = port;
  }
  if (config_->admin) {
    say_if_shared(config_->admin->address, config_->admin->port,
                  "admin: a scrape sees one process at a time");
    admin_handlers handlers;
    // Not ready while draining, nor while some route has no target
    // passing its health check (a load balancer sends nothing here then).
    handlers.ready = [this] {
      return !workers_.front()->draining() && fleet_->every_route_served(*store_->snapshot());
    };
    handlers.metrics_text = [this] { return metrics_text(); };
    handlers.stats_json = [this] { return stats_json(); };
    handlers.budgets_json = [this]() -> net::awaitable<std::string> {
      co_return co_await workers_.front()->budgets().report_json(*store_->snapshot());
    };
    handlers.token = config_->admin->token;
    admin_ = std::make_unique<admin_listener>(workers_.front()->io(), config_->admin->address,
                                              config_->admin->port, std::move(handlers));
    admin_->start();
  }
  prober_->start(workers_.front()->io().get_executor());
  if (sharing_) sharing_->start();
  for (auto& w : workers_) {
    w->start_accepting();
    threads_.emplace_back([w = w.get()] {
      try {
        w->io().run();
      } catch (const std::exception& e) {
        spdlog::critical("worker {} stopped: {}", w->index(), e.what());
      }
    });
  }
}

std::uint16_t server::port(const std::string& listener_name) const {
  return ports_.at(listener_name);
}

namespace {
// A burst, for giving its memory back after: at least this many more
// client connections open at once than are open now.
constexpr std::size_t burst_connections = 1000;
}  // namespace

bool server::release_memory_after_burst() {
  // The collect again at the next checks while no new burst has begun:
  // mimalloc 2.0 gives back some of what was freed before a collect only
  // once its delay is over (allocator.cpp, take_fresh_pages_giving_marked_ones_back).
  if (collects_to_repeat_ > 0 && gate_->peak() < burst_connections) {
    --collects_to_repeat_;
    return collect_each_heap();
  }
  collects_to_repeat_ = 0;
  // (The gate's peak since the last collect, not counts sampled at each
  // check: a burst of short streams can open and close between two checks
  // a second apart, and its memory was then never collected.)
  auto open = gate_->open(), peak = gate_->peak();
  // Only once the burst is over, for two checks in a row (a second apart):
  // the trim locks each malloc arena while it walks it and gives pages back,
  // so a worker still relaying stalls meanwhile. At half the high-water
  // mark it ran in the middle of the burst's last second: after 9,000
  // streams, 6,500 madvise calls and 131 ms in the kernel on the proxy's
  // core while the last streams' events waited (strace, relay_delay.sh).
  if (peak < open + burst_connections || open > peak / 16) {
    quiet_checks_ = 0;
    return false;
  }
  if (++quiet_checks_ < 2) return false;
  quiet_checks_ = 0;
  gate_->restart_peak();
  collects_to_repeat_ = 3;
  return collect_each_heap();
}

bool server::collect_each_heap() {
  if (heap_gives_back_per_thread())
    for (auto& w : workers_) net::post(w->io(), [] { give_back_free_memory(); });
  return give_back_free_memory();
}

void server::release_unused_body_buffers() {
  for (auto& w : workers_) net::post(w->io(), [w = w.get()] { w->bodies().release_unused(); });
}

void server::close_stale_pooled_connections() {
  for (auto& w : workers_)
    net::post(w->io(), [w = w.get()] { w->upstreams().close_stale_connections(); });
}

void server::close_stale_pooled_connections_now() {
  std::latch swept(static_cast<std::ptrdiff_t>(workers_.size()));
  for (auto& w : workers_)
    net::post(w->io(), [w = w.get(), &swept] {
      w->upstreams().close_stale_connections();
      swept.count_down();
    });
  swept.wait();
}

std::size_t server::max_connections() const { return gate_->max_total(); }

std::uint16_t server::admin_port() const { return admin_ ? admin_->port() : 0; }

std::string server::stats_json() const {
  std::vector<const metrics::latency_shard*> latency;
  std::vector<const metrics::shard*> counts;
  std::vector<slow_request> slow;
  for (const auto& w : workers_) {
    latency.push_back(&w->latency());
    counts.push_back(&w->metrics());
    w->slowest().collect(slow, clock::now());
  }
  auto routes = boost::json::parse(metrics::render_stats_json(latency)).as_object();
  auto cfg = store_->snapshot();
  process_facts facts{started_, cfg.get(), config_.get(), reloads_ok_, reloads_failed_};
  {
    std::lock_guard lock(reload_note_mutex_);
    facts.last_reload = last_reload_;
  }
  facts.ports = ports_;
  facts.admin_port = admin_port();
  facts.open_feeds = admin_ ? admin_->open_feeds() : 0;
  facts.max_feeds = admin_listener::max_feeds;
  auto upstreams = upstreams_json(*cfg, boost::json::parse(fleet_->upstreams_json()).as_object());
  add_retries_and_resumes(upstreams, routes["routes"].as_object(), counts);
  // (The members older readers know keep their place and shape; "version"
  // says which shape the rest has.)
  return boost::json::serialize(boost::json::object{
      {"version", 1},
      {"routes", std::move(routes["routes"])},
      {"replicas", boost::json::parse(fleet_->replicas_json())},
      {"upstreams", std::move(upstreams)},
      {"slowest", slowest_json(slowest_of(std::move(slow), slow_requests::kept))},
      {"process", process_json(facts)}});
}

std::vector<std::string> server::reload(std::shared_ptr<const config::config> next) {
  config::check_bound_listeners_keep_an_upstream(config_->listeners, *next);
  store_->replace(next);
  cache_->set_bound(next->cache_max_bytes);
  // Each worker's pools are its own thread's: it adopts the new settings there.
  for (auto& w : workers_)
    net::post(w->io(), [w = w.get(), next] { w->upstreams().adopt_settings(*next); });
  ++reloads_ok_;
  {
    std::lock_guard lock(reload_note_mutex_);
    last_reload_ = {"success", std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count()};
  }
  return config::changes_needing_restart(*config_, *next);
}

void server::count_failed_reload(std::string why) {
  ++reloads_failed_;
  std::lock_guard lock(reload_note_mutex_);
  last_reload_ = {"failure",
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count(),
                  std::move(why)};
}

std::size_t server::reload_certificates(bool only_changed) {
  std::size_t failed = 0;
  for (auto& [listener, credentials] : certificates_) {
    if (only_changed && !credentials->files_changed()) continue;
    try {
      credentials->reload();
      ++tls_reloads_ok_;
      spdlog::info("reload: listener '{}' presents the certificate in {} to new connections",
                   listener, credentials->cert_file());
    } catch (const std::exception& e) {
      ++failed;
      ++tls_reloads_failed_;
      spdlog::error(
          "certificate reload refused for listener '{}', its current certificate stays: {}",
          listener, e.what());
    }
  }
  return failed;
}

std::shared_ptr<const config::config> server::current_config() const { return store_->snapshot(); }

std::string server::metrics_text() const {
  std::vector<const metrics::shard*> shards;
  for (const auto& w : workers_) shards.push_back(&w->metrics());
  auto text = metrics::render_prometheus(shards);
  std::vector<const metrics::latency_shard*> latency;
  for (const auto& w : workers_) latency.push_back(&w->latency());
  text += metrics::render_latency_prometheus(latency);
  text += metrics::render_process_memory_prometheus(metrics::read_process_memory());
  text += metrics::render_cpu_wait_prometheus(metrics::read_cpu_wait_ns());
  if (config::has_budgets(*store_->snapshot()) || config_->redis) text += budgets_->prometheus();
  text += fleet_->prometheus();
  if (config::has_caches(*store_->snapshot())) text += cache_->prometheus();
  if (sharing_) text += sharing_->prometheus();
  if (tracer_) text += tracer_->prometheus();
  text += own_metrics_text();
  return text;
}

// The server's own families: its connection limit, reloads and certificates.
std::string server::own_metrics_text() const {
  metrics::prometheus_text out;
  out.family("tokengate_downstream_cx_limit", metrics::metric_type::gauge,
             "Client connections this process accepts at once (limits.max_connections).");
  out.sample(gate_->max_total());
  out.family("tokengate_config_reloads_total", metrics::metric_type::counter,
             "Policy reloads by result.");
  out.sample({{"result", "success"}}, reloads_ok_.load());
  out.sample({{"result", "failure"}}, reloads_failed_.load());
  // Declared even without TLS listeners, so dashboards and rules find the
  // families; the gauge then has no samples.
  out.family("tokengate_tls_certificate_reloads_total", metrics::metric_type::counter,
             "Certificate reloads by result.");
  out.sample({{"result", "success"}}, tls_reloads_ok_.load());
  out.sample({{"result", "failure"}}, tls_reloads_failed_.load());
  out.family("tokengate_tls_certificate_expiry_timestamp_seconds", metrics::metric_type::gauge,
             "When the certificate each listener presents expires.");
  for (const auto& [listener, credentials] : certificates_)
    out.sample({{"listener", listener}}, credentials->not_after());
  return out.take();
}

void server::drain_and_stop() {
  if (stopped_) return;
  stopped_ = true;
  if (threads_.empty()) return;
  // Each worker takes the connections still queued on its listeners as it
  // begins (worker::begin_drain) and gives them a place in the gate then;
  // their sessions start a moment later. So the wait counts places, and
  // only once every worker has begun: counted sooner, a worker's queued
  // connections were not yet there and were stopped unserved.
  std::atomic<std::size_t> begun{0};
  for (auto& w : workers_)
    net::post(w->io(), [w = w.get(), &begun] {
      w->begin_drain();
      begun.fetch_add(1, std::memory_order_release);
    });
  auto deadline = std::chrono::steady_clock::now() + config_->drain_timeout;
  auto wait_while = [&](auto&& condition) {
    while (condition() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  wait_while([&] { return begun.load(std::memory_order_acquire) < workers_.size(); });
  wait_while([&] { return gate_->open() > 0; });
  if (auto left = gate_->open())
    spdlog::warn("drain deadline reached with {} connections open; closing them", left);
  if (admin_) net::post(workers_.front()->io(), [this] { admin_->stop(); });
  if (sharing_) sharing_->stop();
  for (auto& w : workers_) w->io().stop();
  for (auto& t : threads_) t.join();
  // (The requests' slots still held go back as the workers' io_contexts
  // are destroyed, after sharing_ is: they must not publish through it.)
  fleet_->share_with(nullptr);
  // The spans of the requests that finished go out before the process does.
  if (tracer_)
    tracer_->drain(
        std::chrono::duration_cast<std::chrono::milliseconds>(config_->tracing->timeout));
  threads_.clear();
}

}  // namespace tokengate
