#include "budget/gate.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>

#include "budget/redis_ledger.hpp"
#include "metrics/prometheus_text.hpp"

namespace tokengate::budget {
namespace {

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string where(const config::redis_settings& s) {
  return "redis at " + s.host + ":" + std::to_string(s.port);
}

// Every counter of every key and route with a budget (amounts 0), for
// GET /budgets.
demand everything_configured(const config::config& cfg) {
  demand all;
  auto add = [&](const std::string& scope, const config::budget_limits& b) {
    demand one = demand_for(cfg, config::route{.name = "", .budget = b}, nullptr, "", 0, 0);
    for (auto& c : one.counters) {
      c.scope = scope;
      all.counters.push_back(std::move(c));
    }
  };
  for (const auto& k : cfg.keys)
    if (k.budget.any()) add("key:" + k.name, k.budget);
  for (const auto& r : cfg.routes)
    if (r.budget.any()) add("route:" + r.name, r.budget);
  return all;
}

boost::json::object counter_json(const counter& c, const counter_state& s, std::int64_t now,
                                 const board& refusals) {
  auto colon = c.scope.find(':');
  const bool usd = c.kind == limit_kind::usd_per_day || c.kind == limit_kind::usd_per_month;
  auto shown = [&](long long v) -> boost::json::value {
    if (usd) return static_cast<double>(v) / micro_usd_per_usd;
    return v;
  };
  boost::json::object o;
  o["scope"] = c.scope.substr(0, colon);
  o["name"] = c.scope.substr(colon + 1);
  o["limit"] = kind_name(c.kind);
  o["limit_value"] = shown(c.limit);
  o["used"] = shown(s.used);
  o["remaining"] = shown(std::max(0LL, c.limit - s.used));
  if (c.kind != limit_kind::concurrent_streams) {
    o["resets_in_ms"] = s.reset_ms;
    o["resets_at_unix_ms"] = now + s.reset_ms;
  }
  o["refusals"] = refusals.refusals(c.scope, kind_name(c.kind));  // (by this process)
  return o;
}

}  // namespace

budgets::budgets(std::optional<config::redis_settings> redis) : redis_(std::move(redis)) {
  if (redis_) health_.emplace(where(*redis_));
}

std::string budgets::prometheus() const {
  using metrics::metric_type;
  std::string text = board_.prometheus(unix_ms());
  metrics::prometheus_text out;
  out.family("tokengate_budget_local_fallbacks_total", metric_type::counter,
             "Requests counted by this instance alone while the store did not answer "
             "(on_store_failure: allow_local).");
  out.sample(local_fallbacks.load(std::memory_order_relaxed));
  out.family("tokengate_budget_store_denials_total", metric_type::counter,
             "Requests refused (503) because the store did not answer (on_store_failure: deny).");
  out.sample(store_denials.load(std::memory_order_relaxed));
  if (health_) {
    out.family("tokengate_budget_store_up", metric_type::gauge,
               "Whether the budget store answered last time.");
    out.sample(health_->up() ? 1 : 0);
    out.family("tokengate_budget_store_failures_total", metric_type::counter,
               "Connections lost, replies that broke the protocol and waits that ran out.");
    out.sample(health_->failures());
    out.family("tokengate_budget_settlements_total", metric_type::counter,
               "Settlements sent to the store, by result.");
    out.sample({{"result", "ok"}}, health_->settlements_ok());
    out.sample({{"result", "failed"}}, health_->settlements_failed());
  }
  text += out.take();
  return text;
}

gate::gate(net::any_io_executor executor, budgets& shared)
    : executor_(std::move(executor)), shared_(shared) {
  if (shared_.redis())
    redis_ = std::make_unique<redis::client>(executor_, *shared_.redis(), redis_ledger::scripts(),
                                             *shared_.health());
}

// One command's reply within `timeout`; nullopt after it. A reply that
// comes later goes to `if_late`.
net::awaitable<std::optional<redis::reply>> gate::call(
    std::vector<std::string> args, std::chrono::milliseconds timeout,
    std::function<void(const redis::reply&)> if_late) {
  struct waiting {
    explicit waiting(const net::any_io_executor& ex) : timer(ex) {}
    net::steady_timer timer;
    std::optional<redis::reply> got;
    bool done = false, gave_up = false;
  };
  auto w = std::make_shared<waiting>(executor_);
  redis_->send(std::move(args), [w, if_late = std::move(if_late)](std::optional<redis::reply> r) {
    if (w->gave_up) {
      if (r && if_late) if_late(*r);
      return;
    }
    w->done = true;
    w->got = std::move(r);
    w->timer.cancel();
  });
  if (!w->done) {
    w->timer.expires_after(timeout);
    co_await w->timer.async_wait(use_tuple);
  }
  if (!w->done) {
    w->gave_up = true;
    shared_.health()->failed("no answer within redis.timeout");
    co_return std::nullopt;
  }
  co_return std::move(w->got);
}

net::awaitable<std::optional<reservation>> gate::reserve_in_store(std::shared_ptr<const demand> d,
                                                                  std::vector<long long> leases) {
  const auto& settings = *shared_.redis();
  auto id = new_reservation_id();
  // Too late for its request, which went on without it: given back.
  auto give_back = [this, d, id](const redis::reply& late) {
    auto r = redis_ledger::read_reserve_reply(late, *d, id);
    if (r && r->admitted) redis_->send(redis_ledger::settle_command(*d, *r, {}), [](auto) {});
  };
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(settings.timeout);
  auto got = co_await call(redis_ledger::reserve_command(settings.key_prefix, *d, id, leases),
                           timeout, give_back);
  if (!got) co_return std::nullopt;
  auto r = redis_ledger::read_reserve_reply(*got, *d, id);
  if (!r)
    shared_.health()->failed(got->is_error() ? "the reserve script failed: " + got->text
                                             : "the reserve script answered an unknown shape");
  co_return r;
}

admission gate::decided(std::shared_ptr<const demand> d, reservation r, bool in_store) {
  shared_.board().record(*d, r, unix_ms());
  admission a;
  a.outcome = r.admitted ? admission::verdict::admitted : admission::verdict::refused;
  a.headers = rate_limit_headers(*d, r);
  a.asked = std::move(d);
  a.held = std::move(r);
  a.in_store = in_store;
  return a;
}

net::awaitable<admission> gate::admit(demand wanted) {
  auto d = std::make_shared<const demand>(std::move(wanted));
  if (!redis_) co_return decided(d, shared_.local().reserve(*d, unix_ms()), false);
  carry_over_to_store();
  auto& book = shared_.leases();
  auto taken = book.take(*d, std::chrono::steady_clock::now());
  if (taken.whole) {
    top_up_leases(*d);
    co_return decided(d, std::move(taken.covered), true);
  }
  // Redis is asked for what the leases did not cover.
  auto rest = std::make_shared<demand>(*d);
  for (std::size_t i = 0; i < rest->counters.size(); ++i)
    rest->counters[i].amount -= taken.portions[i];
  auto r = co_await reserve_in_store(rest, lease_book::wishes(*d));
  if (r) shared_.local().saw_in_store(*rest, *r, unix_ms());
  if (r && r->admitted)
    book.grant(*rest, *r, std::chrono::steady_clock::now());
  else
    book.give_back(*d, taken.portions);
  if (r && !r->admitted) {
    // Refused because the rest of the limit went to leases, granted to
    // this process's other requests while this one was asking (a burst
    // that arrives before any reply): those leases cover it now.
    auto again = book.take(*d, std::chrono::steady_clock::now());
    if (again.whole) co_return decided(d, std::move(again.covered), true);
    book.give_back(*d, again.portions);
  }
  if (r) co_return decided(d, std::move(*r), true);
  const auto& settings = *shared_.redis();
  if (settings.on_failure == config::store_failure_mode::deny) {
    shared_.store_denials.fetch_add(1, std::memory_order_relaxed);
    admission a;
    a.outcome = admission::verdict::store_unavailable;
    a.asked = d;
    co_return a;
  }
  shared_.local_fallbacks.fetch_add(1, std::memory_order_relaxed);
  co_return decided(d, shared_.local().reserve_while_store_down(*d, unix_ms(), settings.replicas),
                    false);
}

// What was counted here while Redis did not answer goes to Redis first, on
// the same connection as the reservation that follows (Redis runs a
// connection's commands in order: that reservation sees it). Not taken
// (no connection, no reply): kept for the next try.
void gate::carry_over_to_store() {
  auto& local = shared_.local();
  if (!local.has_carry_over()) return;
  auto counted = local.take_carry_over(unix_ms());
  if (counted.empty()) return;
  auto command = redis_ledger::carry_command(shared_.redis()->key_prefix, counted);
  redis_->send(std::move(command),
               [&local, counted = std::move(counted)](std::optional<redis::reply> r) {
                 if (!r || r->is_error()) local.put_back(counted);
               });
}

// Leases running low are topped up in the background: the same script
// with nothing reserved, only leases asked for.
void gate::top_up_leases(const demand& d) {
  auto& book = shared_.leases();
  if (!book.wants_top_up(d)) return;
  auto wishes = lease_book::wishes(d);
  auto ask = std::make_shared<demand>(d);
  for (auto& c : ask->counters) c.amount = 0;
  auto command = redis_ledger::reserve_command(shared_.redis()->key_prefix, *ask,
                                               new_reservation_id(), wishes);
  auto& local = shared_.local();
  redis_->send(std::move(command), [&book, &local, ask](std::optional<redis::reply> r) {
    std::optional<reservation> granted;
    if (r) granted = redis_ledger::read_reserve_reply(*r, *ask, "");
    if (granted) local.saw_in_store(*ask, *granted, unix_ms());
    if (granted && granted->admitted) book.grant(*ask, *granted, std::chrono::steady_clock::now());
    book.topped_up(*ask);
  });
}

void gate::settle(admission& a, const usage& real) {
  if (a.settled || a.outcome != admission::verdict::admitted) return;
  a.settled = true;
  if (!a.in_store) return shared_.local().settle(*a.asked, a.held, real);
  auto* health = shared_.health();
  redis_->send(redis_ledger::settle_command(*a.asked, a.held, real),
               [health](std::optional<redis::reply> r) {
                 if (r && !r->is_error())
                   health->settled();
                 else
                   health->settle_failed(r ? r->text : "no connection");
               });
}

void gate::give_back(admission& a) {
  if (a.settled || a.outcome != admission::verdict::admitted) return;
  a.settled = true;
  if (!a.in_store) return shared_.local().give_back(*a.asked, a.held);
  redis_->send(redis_ledger::give_back_command(*a.asked, a.held), [](auto) {});
}

net::awaitable<std::string> gate::report_json(const config::config& cfg) {
  auto all = everything_configured(cfg);
  const auto now = unix_ms();
  std::optional<std::vector<counter_state>> states;
  boost::json::object out;
  if (redis_) {
    out["store"] = where(*shared_.redis());
    auto got = co_await call(redis_ledger::peek_command(shared_.redis()->key_prefix, all),
                             std::chrono::seconds(1), nullptr);
    if (got) states = redis_ledger::read_peek_reply(*got, all);
    out["store_up"] = states.has_value();
    out["view"] = states ? "store" : "local";
    // Unanswered: what this instance counts, carrying on from what Redis
    // last reported (budget/local_ledger.hpp), rather than nothing.
    if (!states) states = shared_.local().peek(all, now);
  } else {
    out["store"] = "this process";
    out["view"] = "local";
    states = shared_.local().peek(all, now);
  }
  boost::json::array list;
  for (std::size_t i = 0; states && i < all.counters.size(); ++i)
    list.push_back(counter_json(all.counters[i], (*states)[i], now, shared_.board()));
  out["budgets"] = std::move(list);
  co_return boost::json::serialize(out) + "\n";
}

}  // namespace tokengate::budget
