#include "server/cache_phase.hpp"

#include <array>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <optional>

#include "cache/forms.hpp"
#include "cache/key.hpp"
#include "cache/replay.hpp"
#include "io/any_stream.hpp"
#include "io/write_all.hpp"
#include "server/admitted_exchange.hpp"
#include "server/worker.hpp"

namespace tokengate {
namespace {

namespace json = boost::json;

// The request's Cache-Control, as far as a response cache reads it.
struct client_cache_control {
  bool no_cache = false, no_store = false;
  std::optional<std::chrono::seconds> max_age;
};

client_cache_control cache_control_of(std::string_view value) {
  client_cache_control c;
  while (!value.empty()) {
    auto comma = value.find(',');
    auto directive = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    while (!directive.empty() && (directive.front() == ' ' || directive.front() == '\t'))
      directive.remove_prefix(1);
    while (!directive.empty() && (directive.back() == ' ' || directive.back() == '\t'))
      directive.remove_suffix(1);
    if (directive == "no-cache") c.no_cache = true;
    if (directive == "no-store") c.no_store = true;
    if (directive.starts_with("max-age=")) {
      long long seconds = 0;
      auto digits = directive.substr(8);
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seconds);
      if (ec == std::errc() && end == digits.data() + digits.size() && seconds >= 0)
        c.max_age = std::chrono::seconds(seconds);
    }
  }
  return c;
}

// Whose answers a request may read: its key's (the name, never the
// secret), or the route's with scope: route.
std::string identity_of(const routing::routed_request& routed) {
  if (routed.route->cache->scope == config::cache_scope::route)
    return "route:" + routed.route->name;
  return routed.key ? "key:" + routed.key->name : "key:";
}

bool natural_finish(std::string_view reason) {
  for (std::string_view natural : {"stop", "tool_calls", "function_call", "end_turn", "tool_use",
                                   "stop_sequence", "completed"})
    if (reason == natural) return true;
  return false;
}

// A whole answer's finish, as its dialect spells it.
std::string whole_finish(std::string_view body) {
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  if (ec || !parsed.is_object()) return {};
  const auto& o = parsed.get_object();
  auto text_at = [](const json::object& in, std::string_view key) -> std::string {
    auto* v = in.if_contains(key);
    return v && v->is_string() ? std::string(v->get_string()) : std::string();
  };
  if (auto* choices = o.if_contains("choices"); choices && choices->is_array() &&
                                                !choices->get_array().empty() &&
                                                choices->get_array().front().is_object())
    return text_at(choices->get_array().front().get_object(), "finish_reason");
  if (o.contains("stop_reason")) return text_at(o, "stop_reason");
  return text_at(o, "status");
}

bool completed(const upstream::answer_copy& copy, const request_context& ctx) {
  if (!copy.usable || copy.bytes.empty() || ctx.status != 200 || ctx.error || ctx.client_gone ||
      ctx.upstream_failed_midstream || ctx.limit_enforced || ctx.resumes > 0 || !ctx.output_tokens)
    return false;
  return natural_finish(ctx.streamed ? ctx.finish_reason : whole_finish(copy.bytes));
}

// The kept answer, re-framed: written at once, or (pace: original) a
// piece at a time at the original stream's times.
net::awaitable<bool> replay(any_stream& stream, worker& w, const cache::entry& e, bool paced,
                            const client_request& request, request_context& ctx, bool keep_alive) {
  auto age = std::chrono::duration_cast<std::chrono::seconds>(cache::wall_clock::now() - e.stored);
  auto pieces =
      cache::replay_pieces(e, {request.head.version, keep_alive, ctx.usage_injected, ctx.request_id,
                               std::max(age, std::chrono::seconds(0)), paced});
  ctx.status = 200;
  ctx.streamed = e.streamed;
  ctx.upstream = "cache";
  const auto start = clock::now();
  net::steady_timer pace(co_await net::this_coro::executor);
  for (const auto& piece : pieces) {
    if (piece.at.count() > 0) {
      pace.expires_at(start + piece.at);
      co_await pace.async_wait(use_tuple);
    }
    const std::array<net::const_buffer, 1> bytes{net::buffer(piece.bytes)};
    stream.expires_after(w.config().limits.client_write_timeout);
    auto [ec, n] = co_await write_all(stream, bytes);
    stream.expires_never();
    ctx.bytes_to_client += n;
    if (ctx.first_token_written == clock::time_point{}) ctx.first_token_written = clock::now();
    if (ec) {
      ctx.client_gone = true;
      co_return false;
    }
  }
  co_return keep_alive;
}

// A lookup's result, told to the request and counted on its route.
void counted(cache::store& store, const std::string& route, const cache_decision& d,
             request_context& ctx) {
  ctx.cache = d.hit ? "hit" : "miss";
  if (d.hit)
    store.count_hit(route, d.hit->input_tokens + d.hit->output_tokens);
  else
    store.count_miss(route);
}

}  // namespace

cache_decision look_up_answer(worker& w, const routing::routed_request& routed,
                              const client_request& request, request_context& ctx) {
  if (!routed.route->cache) return {};
  const auto& settings = *routed.route->cache;
  auto& store = w.response_cache();
  auto control = cache_control_of(request.head.value_of("cache-control"));
  auto identity = identity_of(routed);
  auto made = cache::key_for(settings, {identity, routed.route->name, routed.model, ctx.path,
                                        body_text(request), routed.stream});
  cache_decision d{nullptr, control.no_store ? std::string() : made.key, &settings};
  if (!made.not_cached.empty() || control.no_cache) {
    ctx.cache = "bypass";
    store.count_bypass(routed.route->name);
    return d;
  }
  d.streamed = routed.stream;
  ctx.cache = "miss";
  if (w.shared_cache()) {  // (looked up by look_up_shared, which may wait)
    d.shared_key = std::move(made.key);
    d.max_age = control.max_age;
    return d;
  }
  // (either form: a stream rebuilt whole, a whole answer as events)
  d.hit = cache::in_form(store.find(made.key, cache::wall_clock::now(), control.max_age),
                         routed.stream);
  counted(store, routed.route->name, d, ctx);
  return d;
}

net::awaitable<void> look_up_shared(worker& w, cache_decision& d, request_context& ctx) {
  if (d.shared_key.empty() || !w.shared_cache()) co_return;
  auto found = co_await w.shared_cache()->find(d.shared_key, cache::wall_clock::now(), d.max_age);
  d.hit = cache::in_form(std::move(found), d.streamed);
  counted(w.response_cache(), ctx.route, d, ctx);
}

void prepare_exchange(const cache_decision& d, upstream::exchange_plan& plan,
                      const request_context& ctx) {
  if (!d.settings) return;
  plan.response_headers.emplace_back("x-tokengate-cache", std::string(ctx.cache));
  if (d.key.empty()) return;
  plan.copy = std::make_unique<upstream::answer_copy>();
  plan.copy->limit = d.settings->max_entry_bytes;
}

net::awaitable<bool> answer_from_cache(any_stream& stream, worker& w, const cache_decision& d,
                                       const client_request& request, request_context& ctx,
                                       budget::demand demand, bool keep_alive) {
  const auto& e = *d.hit;
  const bool billed = d.settings->bill_hits;
  const budget::usage stored{e.input_tokens, e.output_tokens};
  auto asked = billed ? budget::billed_hit(std::move(demand), stored)
                      : budget::requests_only(std::move(demand));
  std::optional<budget::admission> counted;
  if (!asked.empty()) {
    counted = co_await w.budgets().admit(std::move(asked));
    if (counted->outcome != budget::admission::verdict::admitted) {
      co_await refuse_by_budget(stream, *counted, keep_alive, ctx);
      co_return keep_alive;
    }
  }
  bool keep = co_await replay(stream, w, e, d.settings->paced, request, ctx, keep_alive);
  if (counted) w.budgets().settle(*counted, billed ? stored : budget::usage{});
  co_return keep;
}

void keep_answer(worker& w, const cache_decision& d, upstream::exchange_plan& plan,
                 const request_context& ctx) {
  if (d.key.empty() || !plan.copy || !completed(*plan.copy, ctx)) return;
  auto e = std::make_shared<cache::entry>();
  e->route = ctx.route;
  e->body = std::move(plan.copy->bytes);
  e->marks.reserve(plan.copy->marks.size());
  for (const auto& m : plan.copy->marks) e->marks.push_back({m.end, m.at});
  e->streamed = ctx.streamed;
  e->dialect = ctx.dialect;
  e->content_type = ctx.streamed ? "text/event-stream" : "application/json";
  e->input_tokens = ctx.input_tokens.value_or(0);
  e->output_tokens = ctx.output_tokens.value_or(0);
  e->stored = cache::wall_clock::now();
  e->expires = e->stored + d.settings->ttl;
  if (auto* shared = w.shared_cache()) {
    shared->keep(d.key, *e,
                 [&store = w.response_cache(), route = e->route] { store.count_stored(route); });
  } else
    w.response_cache().keep(d.key, std::move(e));
}

}  // namespace tokengate
