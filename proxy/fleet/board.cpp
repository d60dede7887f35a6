#include "fleet/board.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cmath>

#include "fleet/index_sharing.hpp"
#include "metrics/prometheus_text.hpp"

namespace tokengate::fleet {

using steady = std::chrono::steady_clock;

namespace {

// Queue wait, Prometheus buckets in seconds.
constexpr std::array<double, 11> wait_bounds{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                             0.5,   1,    2.5,   5,    10};
constexpr std::size_t drain_window = 64;  // slots freed: the drain rate's sample

// A histogram's buckets as read now, each bucket's own count.
template <std::size_t N>
std::array<std::uint64_t, N> read_buckets(
    const std::array<std::atomic<std::uint64_t>, N>& buckets) {
  std::array<std::uint64_t, N> counts{};
  for (std::size_t b = 0; b < N; ++b) counts[b] = buckets[b].load();
  return counts;
}

// No room for a request: the client may come back after `retry_after_s`.
request_error refused(unsigned status, std::string_view code, std::string message,
                      int retry_after_s) {
  auto e = request_error::upstream(status, code, std::move(message));
  e.type = status == 429 ? "rate_limit_exceeded" : "server_error";
  e.retry_after_s = retry_after_s;
  return e;
}

// Whether balance: fastest has anything to say of the upstream (a
// declared capacity, or prompts sent there).
bool learned(const upstream_load& l) { return l.max_streams.load() > 0 || l.index.size() > 0; }

// A gauge with a line per upstream (with `only_learned`, those balance:
// fastest has learned something of), each `value(load)`.
template <typename Loads, typename Value>
void per_upstream_gauge(metrics::prometheus_text& out, const Loads& loads, const char* name,
                        const char* help, Value value, bool only_learned = false) {
  out.family(name, metrics::metric_type::gauge, help);
  for (const auto& [upstream, l] : loads)
    if (!only_learned || learned(*l)) out.sample({{"upstream", upstream}}, value(*l));
}

}  // namespace

struct board::waiter {
  explicit waiter(net::any_io_executor ex) : timer(ex) {}
  net::steady_timer timer;  // cancelled (on its own thread) when a slot is handed over
  admission_request asked;
  std::uint64_t arrival = 0;
  steady::time_point home_until;       // before it, only the first candidate's slot will do
  std::optional<std::size_t> granted;  // the candidate whose slot it was given
  slot held;                           // … that slot
};

struct board::route_counters {
  std::array<std::atomic<std::uint64_t>, wait_bounds.size() + 1> wait_buckets{};
  std::atomic<std::uint64_t> wait_count{0}, wait_sum_us{0};
  std::atomic<std::uint64_t> refused_no_capacity{0}, refused_queue_full{0}, refused_timeout{0};
  std::atomic<std::uint64_t> affinity_home{0}, affinity_spilled{0};
  std::atomic<std::size_t> waiting{0};

  void waited(std::chrono::microseconds w) {
    const double s = static_cast<double>(w.count()) / 1e6;
    std::size_t b = 0;
    while (b < wait_bounds.size() && s > wait_bounds[b]) ++b;
    wait_buckets[b].fetch_add(1, std::memory_order_relaxed);
    wait_count.fetch_add(1, std::memory_order_relaxed);
    wait_sum_us.fetch_add(static_cast<std::uint64_t>(w.count()), std::memory_order_relaxed);
  }
};

slot& slot::operator=(slot&& o) noexcept {
  if (this == &o) return *this;
  give_back();
  board_ = std::exchange(o.board_, nullptr);
  load_ = std::exchange(o.load_, nullptr);
  tokens_ = o.tokens_;
  prefill_ = std::exchange(o.prefill_, 0);
  bounded_ = o.bounded_;
  pending_ = std::move(o.pending_);
  o.pending_.clear();
  return *this;
}

// (Waiters may be waiting for the blocks it brings, wherever its bounds.)
void slot::first_token() noexcept {
  if (!load_ || (prefill_ <= 0 && pending_.empty())) return;
  const bool offer = bounded_ || !pending_.empty();
  load_->index.prefilled(pending_);
  pending_.clear();
  board_->prefill_done(*load_, std::exchange(prefill_, 0), offer);
}

void slot::give_back() {
  if (!load_) return;
  const bool offer = bounded_ || !pending_.empty();
  load_->index.abandoned(pending_);
  pending_.clear();
  board_->give_back(*std::exchange(load_, nullptr), tokens_, std::exchange(prefill_, 0), offer);
}

board::board() = default;
board::~board() = default;

upstream_load& board::load_of(const std::string& upstream) {
  {
    std::shared_lock read(loads_lock_);
    if (auto it = loads_.find(upstream); it != loads_.end()) return *it->second;
  }
  std::unique_lock write(loads_lock_);
  auto& entry = loads_[upstream];
  if (!entry) entry = std::make_unique<upstream_load>(upstream);
  return *entry;
}

board::route_counters& board::counters_of(const std::string& route) {
  auto& c = routes_[route];  // (under queue_lock_)
  if (!c) c = std::make_unique<route_counters>();
  return *c;
}

bool board::every_route_served(const config::config& cfg) {
  return std::all_of(cfg.routes.begin(), cfg.routes.end(), [&](const config::route& r) {
    return std::any_of(r.targets.begin(), r.targets.end(), [&](const auto& t) {
      return load_of(t.upstream).probed_healthy.load(std::memory_order_relaxed);
    });
  });
}

void board::note_pick(const std::string& route, bool by_affinity, bool spilled) {
  if (!by_affinity && !spilled) return;
  std::lock_guard lock(queue_lock_);
  auto& c = counters_of(route);
  (spilled ? c.affinity_spilled : c.affinity_home).fetch_add(1, std::memory_order_relaxed);
}

// Healthy candidates only, unless none is healthy.
static bool usable(const admission_request& r, const candidate& c) {
  if (c.healthy) return true;
  return std::none_of(r.candidates.begin(), r.candidates.end(),
                      [](const candidate& x) { return x.healthy; });
}

// A free slot there and room in its prefill budget (a prompt larger than
// the whole budget goes in alone).
static bool has_room(const candidate& c) {
  const auto& load = *c.load;
  if (c.max_streams > 0 && load.streams.load(std::memory_order_relaxed) >= c.max_streams)
    return false;
  if (c.waits_for_block && load.index.pending(c.waits_for_block)) return false;
  if (c.max_prefill_tokens <= 0 || c.prefill_tokens <= 0) return true;
  const auto prefilling = load.prefilling.load(std::memory_order_relaxed);
  return prefilling <= 0 || prefilling + c.prefill_tokens <= c.max_prefill_tokens;
}

slot board::take(const admission_request& r, const candidate& c) {
  c.load->streams.fetch_add(1, std::memory_order_relaxed);
  c.load->tokens.fetch_add(r.tokens, std::memory_order_relaxed);
  c.load->prefill_sent(c.prefill_tokens);
  slot s(this, c.load, r.tokens, c.prefill_tokens, c.bounded());
  if (r.blocks) {
    s.pending_ = c.load->index.insert_pending(*r.blocks);  // (held from now on)
    if (sharing_) sharing_->publish(c.load->name, *r.blocks);
  }
  return s;
}

std::optional<admitted> board::claim(const admission_request& r, bool home_only,
                                     const waiter* self) {
  for (std::size_t i = 0; i < (home_only ? 1 : r.candidates.size()); ++i) {
    const auto& c = r.candidates[i];
    if (!usable(r, c) || !has_room(c)) continue;
    if (c.bounded()) {  // (a waiter ahead of it that could use that room has it first)
      auto [ahead, index] = first_waiter_for(*c.load);
      if (ahead && ahead.get() != self &&
          std::pair(ahead->asked.priority, ahead->arrival) <
              std::pair(r.priority, self ? self->arrival : arrivals_ + 1))
        continue;
    }
    admitted a;
    a.held = take(r, c);
    a.index = i;
    return a;
  }
  return std::nullopt;
}

void board::give_back(upstream_load& load, long long tokens, long long prefill, bool offer_room) {
  load.finished.fetch_add(1, std::memory_order_relaxed);
  const auto release = [&] {
    load.streams.fetch_sub(1, std::memory_order_relaxed);
    load.tokens.fetch_sub(tokens, std::memory_order_relaxed);
    load.prefill_ended(prefill);
  };
  if (!offer_room) return release();
  const int max = load.max_streams.load(std::memory_order_relaxed);
  if (max > 0 && load.streams.load(std::memory_order_relaxed) >= max)
    load.ttft.observe_end(steady::now());  // (a slot of a full replica: how fast a queue moves)
  std::lock_guard lock(queue_lock_);
  recent_frees_.push_back(steady::now());
  if (recent_frees_.size() > drain_window) recent_frees_.pop_front();
  release();
  offer(load);
}

void board::prefill_done(upstream_load& load, long long prefill, bool offer_room) {
  if (!offer_room) return load.prefill_ended(prefill);
  std::lock_guard lock(queue_lock_);
  load.prefill_ended(prefill);
  offer(load);
}

// The best waiter (highest priority, then first come) that could use the
// upstream now (its home hold over, or it is its home), and as which of
// its candidates.
std::pair<std::shared_ptr<board::waiter>, std::size_t> board::first_waiter_for(
    const upstream_load& load) const {
  std::shared_ptr<waiter> best;
  std::size_t index = 0;
  const auto now = steady::now();
  for (const auto& w : waiters_) {
    if (best &&
        std::pair(w->asked.priority, w->arrival) >= std::pair(best->asked.priority, best->arrival))
      continue;
    const std::size_t can_take = now < w->home_until ? 1 : w->asked.candidates.size();
    for (std::size_t i = 0; i < can_take; ++i)
      if (w->asked.candidates[i].load == &load && usable(w->asked, w->asked.candidates[i])) {
        best = w;
        index = i;
        break;
      }
  }
  return {best, index};
}

// The waiters, best first (highest priority, then first come), take the
// upstream's room while it lasts. The best one that could use it and does
// not fit stops the rest: nobody overtakes it there.
void board::offer(upstream_load& load) {
  for (;;) {
    auto [best, index] = first_waiter_for(load);
    if (!best || !has_room(best->asked.candidates[index])) return;
    best->held = take(best->asked, best->asked.candidates[index]);
    best->granted = index;
    std::erase(waiters_, best);
    counters_of(best->asked.route).waiting.fetch_sub(1, std::memory_order_relaxed);
    net::post(best->timer.get_executor(), [best] { best->timer.cancel(); });
  }
}

// Seconds until a place is likely free for the queue's last: the queue's
// length over the rate at which slots came free lately.
int board::retry_after(std::size_t queued) const {
  if (recent_frees_.size() < 2) return 1;
  const double span =
      std::chrono::duration<double>(recent_frees_.back() - recent_frees_.front()).count();
  if (span <= 0) return 1;
  const double per_second = static_cast<double>(recent_frees_.size() - 1) / span;
  const double s = std::ceil(static_cast<double>(queued + 1) / per_second);
  return static_cast<int>(std::clamp(s, 1.0, 60.0));
}

net::awaitable<std::variant<admitted, request_error>> board::admit(admission_request r) {
  const auto since = steady::now();
  const bool bounded = std::any_of(r.candidates.begin(), r.candidates.end(),
                                   [](const candidate& c) { return c.bounded(); });
  if (!bounded) {  // nothing to wait for: no lock
    if (auto a = claim(r, false)) co_return std::move(*a);
  }
  const bool hold = r.home_hold.count() > 0 && r.queue;
  {
    std::unique_lock lock(queue_lock_);
    auto& counters = counters_of(r.route);
    if (auto a = claim(r, hold)) {
      counters.waited(std::chrono::microseconds(0));
      co_return std::move(*a);
    }
    if (!r.queue) {
      counters.refused_no_capacity.fetch_add(1, std::memory_order_relaxed);
      co_return refused(503, "engine_overloaded",
                        "every target of route '" + r.route + "' is at its capacity",
                        retry_after(0));
    }
    const auto queued = counters.waiting.load(std::memory_order_relaxed);
    if (queued >= r.queue->max_waiting) {
      counters.refused_queue_full.fetch_add(1, std::memory_order_relaxed);
      co_return refused(429, "queue_full",
                        "route '" + r.route + "' has " + std::to_string(queued) +
                            " requests waiting for capacity already",
                        retry_after(queued));
    }
  }
  co_return co_await wait_in_queue(std::move(r), since);
}

net::awaitable<std::variant<admitted, request_error>> board::wait_in_queue(
    admission_request r, steady::time_point since) {
  auto w = std::make_shared<waiter>(co_await net::this_coro::executor);
  const auto deadline = since + r.queue->timeout;
  w->home_until = since + r.home_hold;
  w->timer.expires_at(std::min(deadline, std::max(w->home_until, since)));
  {
    std::lock_guard lock(queue_lock_);
    if (auto a = claim(r, steady::now() < w->home_until)) {  // (a slot came free meanwhile)
      counters_of(r.route).waited(
          std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - since));
      co_return std::move(*a);
    }
    w->asked = std::move(r);
    w->arrival = ++arrivals_;
    waiters_.push_back(w);
    counters_of(w->asked.route).waiting.fetch_add(1, std::memory_order_relaxed);
  }
  for (;;) {
    co_await w->timer.async_wait(use_tuple);
    std::lock_guard lock(queue_lock_);
    if (w->granted || steady::now() >= deadline) break;
    // The hold for the conversation's replica is over: any free slot now,
    // else on waiting for any.
    if (auto a = claim(w->asked, false, w.get())) {
      std::erase(waiters_, w);
      auto& counters = counters_of(w->asked.route);
      counters.waiting.fetch_sub(1, std::memory_order_relaxed);
      a->waited = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - since);
      counters.waited(a->waited);
      co_return std::move(*a);
    }
    w->timer.expires_at(deadline);
  }
  std::lock_guard lock(queue_lock_);
  auto& counters = counters_of(w->asked.route);
  const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - since);
  if (w->granted) {
    counters.waited(waited);
    admitted a;
    a.held = std::move(w->held);
    a.index = *w->granted;
    a.waited = waited;
    co_return a;
  }
  std::erase(waiters_, w);
  counters.waiting.fetch_sub(1, std::memory_order_relaxed);
  counters.refused_timeout.fetch_add(1, std::memory_order_relaxed);
  const auto queued = counters.waiting.load(std::memory_order_relaxed);
  co_return refused(503, "queue_timeout",
                    "no target of route '" + w->asked.route + "' had capacity within " +
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           w->asked.queue->timeout)
                                           .count()) +
                        " ms",
                    retry_after(queued));
}

void board::note_prediction_error(double predicted_s, double actual_s) {
  if (actual_s <= 0) return;
  const double error = std::abs(predicted_s - actual_s) / actual_s;
  std::size_t b = 0;
  while (b < error_bounds.size() && error > error_bounds[b]) ++b;
  error_buckets_[b].fetch_add(1, std::memory_order_relaxed);
  error_count_.fetch_add(1, std::memory_order_relaxed);
  error_sum_millis_.fetch_add(static_cast<std::uint64_t>(error * 1000), std::memory_order_relaxed);
}

// balance: fastest: what each replica's model has learned, its index's
// size, and how far the predictions were off.
void board::prediction_prometheus(metrics::prometheus_text& out) const {
  using metrics::sample_value;
  const auto per_upstream = [&](const char* name, const char* help, auto value) {
    per_upstream_gauge(out, loads_, name, help, value, true);
  };
  per_upstream("tokengate_fleet_prefill_tokens_per_second",
               "The replica's learned prefill rate (balance: fastest).",
               [](const upstream_load& l) {
                 return sample_value::fixed(l.ttft.prefill_tokens_per_second());
               });
  per_upstream(
      "tokengate_fleet_slots_per_second",
      "How fast the replica's slots came free while it was full.",
      [](const upstream_load& l) { return sample_value::fixed(l.ttft.slots_per_second()); });
  per_upstream("tokengate_fleet_prefix_index_blocks",
               "Prompt blocks the replica is taken to hold (64 tokens each).",
               [](const upstream_load& l) { return l.index.size(); });
  per_upstream("tokengate_fleet_prefix_index_bytes", "Memory the replica's prefix index takes.",
               [](const upstream_load& l) { return l.index.bytes(); });
  out.family("tokengate_fleet_cached_prompt_tokens_total", metrics::metric_type::counter,
             "Prompt tokens of the answers that reported their cache: predicted cached by the "
             "index, and reported cached by the engine.");
  for (const auto& [upstream, l] : loads_) {
    if (!learned(*l)) continue;
    out.sample({{"upstream", upstream}, {"source", "predicted"}},
               l->predicted_cached_tokens.load());
    out.sample({{"upstream", upstream}, {"source", "reported"}}, l->reported_cached_tokens.load());
  }
  out.family("tokengate_fleet_ttft_prediction_error", metrics::metric_type::histogram,
             "|predicted - actual| / actual time to first token of the requests that found a "
             "slot free.");
  const auto counts = read_buckets(error_buckets_);
  out.histogram({}, error_bounds, counts,
                sample_value::fixed(static_cast<double>(error_sum_millis_.load()) / 1000),
                error_count_.load());
}

std::string board::replicas_json() const {
  boost::json::object out;
  std::shared_lock read(loads_lock_);
  for (const auto& [upstream, l] : loads_) {
    if (!learned(*l)) continue;
    out[upstream] = boost::json::object{
        {"in_flight_streams", l->streams.load()},
        {"in_flight_prefill_tokens", l->prefilling.load()},
        {"prefill_tokens_per_second", std::round(l->ttft.prefill_tokens_per_second())},
        {"base_ms", std::round(1000 * l->ttft.base_seconds() * 10) / 10},
        {"slots_per_second", std::round(l->ttft.slots_per_second() * 100) / 100},
        {"prefix_index_blocks", l->index.size()},
        {"prefix_index_bytes", l->index.bytes()},
        {"cached_prompt_tokens_predicted", l->predicted_cached_tokens.load()},
        {"cached_prompt_tokens_reported", l->reported_cached_tokens.load()}};
  }
  return boost::json::serialize(out);
}

std::string board::upstreams_json() const {
  std::map<const upstream_load*, int> queued;
  {
    std::lock_guard lock(queue_lock_);
    for (const auto& w : waiters_)
      for (const auto& c : w->asked.candidates) ++queued[c.load];
  }
  using boost::json::value;
  auto known = [](int v) { return v < 0 ? value(nullptr) : value(v); };
  boost::json::object out;
  std::shared_lock read(loads_lock_);
  for (const auto& [upstream, l] : loads_) {
    const auto running = l->engine_running.load();
    const auto prompt = static_cast<double>(l->reported_prompt_tokens.load());
    const auto cached = static_cast<double>(l->reported_cached_tokens.load());
    auto in_queue = queued.find(l.get());
    out[upstream] = boost::json::object{
        {"healthy", l->probed_healthy.load()},
        {"health_changed_unix_ms", l->health_changed_unix_ms.load() == 0
                                       ? value(nullptr)
                                       : value(l->health_changed_unix_ms.load())},
        {"in_flight_streams", l->streams.load()},
        {"queued", in_queue == queued.end() ? 0 : in_queue->second},
        {"engine_running", known(running)},
        {"engine_waiting",
         running < 0 ? value(nullptr) : value(std::max(0, l->engine_waiting.load()))},
        {"prefix_cache_hit_ratio",
         prompt > 0 ? value(std::round(1000 * cached / prompt) / 1000) : value(nullptr)}};
  }
  return boost::json::serialize(out);
}

// tokengate_upstream_* and balance: fastest's tokengate_fleet_*.
void board::upstream_prometheus(metrics::prometheus_text& out) const {
  std::shared_lock read(loads_lock_);
  per_upstream_gauge(out, loads_, "tokengate_upstream_in_flight_streams",
                     "Requests of this instance on the upstream.",
                     [](const upstream_load& l) { return l.streams.load(); });
  per_upstream_gauge(out, loads_, "tokengate_upstream_in_flight_tokens",
                     "Prompt estimates plus output limits of those requests.",
                     [](const upstream_load& l) { return l.tokens.load(); });
  per_upstream_gauge(out, loads_, "tokengate_upstream_in_flight_prefill_tokens",
                     "Prompt tokens of those requests whose first token has not come back.",
                     [](const upstream_load& l) { return l.prefilling.load(); });
  per_upstream_gauge(out, loads_, "tokengate_upstream_probe_healthy",
                     "1 while the upstream passes its active health check (1 without one).",
                     [](const upstream_load& l) { return l.probed_healthy.load() ? 1 : 0; });
  out.family("tokengate_upstream_engine_requests", metrics::metric_type::gauge,
             "The engine's own running and waiting requests, from its metrics page.");
  for (const auto& [name, l] : loads_) {
    if (l->engine_running.load() < 0) continue;
    out.sample({{"upstream", name}, {"state", "running"}}, l->engine_running.load());
    out.sample({{"upstream", name}, {"state", "waiting"}}, std::max(0, l->engine_waiting.load()));
  }
  prediction_prometheus(out);
}

std::string board::prometheus() const {
  metrics::prometheus_text out;
  upstream_prometheus(out);
  std::lock_guard lock(queue_lock_);
  if (!routes_.empty()) admission_prometheus(out);
  return out.take();
}

// tokengate_admission_* and tokengate_affinity_*, by route (under queue_lock_).
void board::admission_prometheus(metrics::prometheus_text& out) const {
  using metrics::metric_type;
  out.family("tokengate_admission_queue_length", metric_type::gauge,
             "Requests waiting for a slot, by route.");
  for (const auto& [route, c] : routes_) out.sample({{"route", route}}, c->waiting.load());
  out.family("tokengate_admission_wait_seconds", metric_type::histogram,
             "Time from arrival to a slot, by route.");
  for (const auto& [route, c] : routes_) {
    const auto counts = read_buckets(c->wait_buckets);
    out.histogram({{"route", route}}, wait_bounds, counts,
                  metrics::sample_value::fixed(static_cast<double>(c->wait_sum_us.load()) / 1e6),
                  c->wait_count.load());
  }
  out.family("tokengate_admission_refused_total", metric_type::counter,
             "Requests refused for want of capacity.");
  for (const auto& [route, c] : routes_)
    for (auto [reason, n] : {std::pair("no_capacity", &c->refused_no_capacity),
                             std::pair("queue_full", &c->refused_queue_full),
                             std::pair("queue_timeout", &c->refused_timeout)})
      out.sample({{"route", route}, {"reason", reason}}, n->load());
  out.family("tokengate_affinity_total", metric_type::counter,
             "Requests whose conversation chose their target.");
  for (const auto& [route, c] : routes_) {
    out.sample({{"route", route}, {"outcome", "home"}}, c->affinity_home.load());
    out.sample({{"route", route}, {"outcome", "spilled"}}, c->affinity_spilled.load());
  }
}

}  // namespace tokengate::fleet
