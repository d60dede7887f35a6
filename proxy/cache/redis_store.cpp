#include "cache/redis_store.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace tokengate::cache {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;

constexpr std::string_view magic = "tokengate-cache-1\n";

std::int64_t ms_of(wall_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
}

std::int64_t int_at(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_int64() ? v->get_int64() : 0;
}

}  // namespace

std::string serialized(const entry& e) {
  json::array marks;
  for (const auto& m : e.marks)
    marks.push_back(json::array{static_cast<std::int64_t>(m.end), m.at.count()});
  json::object head{{"route", e.route},
                    {"streamed", e.streamed},
                    {"dialect", static_cast<int>(e.dialect)},
                    {"input_tokens", e.input_tokens},
                    {"output_tokens", e.output_tokens},
                    {"stored_ms", ms_of(e.stored)},
                    {"expires_ms", ms_of(e.expires)},
                    {"marks", std::move(marks)}};
  std::string out(magic);
  out += json::serialize(head);
  out += '\n';
  return out += e.body;
}

std::shared_ptr<entry> deserialized(std::string_view value) {
  if (!value.starts_with(magic)) return nullptr;
  value.remove_prefix(magic.size());
  auto line_end = value.find('\n');
  if (line_end == std::string_view::npos) return nullptr;
  boost::system::error_code ec;
  auto head = json::parse(value.substr(0, line_end), ec);
  if (ec || !head.is_object()) return nullptr;
  const auto& h = head.get_object();
  auto d = int_at(h, "dialect");
  if (d < 0 || d > static_cast<int>(dialect::other)) return nullptr;
  auto e = std::make_shared<entry>();
  e->body = value.substr(line_end + 1);
  if (auto* route = h.if_contains("route"); route && route->is_string())
    e->route = route->get_string();
  auto* streamed = h.if_contains("streamed");
  e->streamed = streamed && streamed->is_bool() && streamed->get_bool();
  e->dialect = static_cast<dialect>(d);
  // (never read from the store: a content type is a header)
  e->content_type = e->streamed ? "text/event-stream" : "application/json";
  e->input_tokens = int_at(h, "input_tokens");
  e->output_tokens = int_at(h, "output_tokens");
  e->stored = wall_clock::time_point(milliseconds(int_at(h, "stored_ms")));
  e->expires = wall_clock::time_point(milliseconds(int_at(h, "expires_ms")));
  if (auto* marks = h.if_contains("marks"); marks && marks->is_array())
    for (const auto& m : marks->get_array())
      if (m.is_array() && m.get_array().size() == 2 && m.get_array()[0].is_int64() &&
          m.get_array()[1].is_int64() && m.get_array()[0].get_int64() >= 0)
        e->marks.push_back({static_cast<std::size_t>(m.get_array()[0].get_int64()),
                            milliseconds(m.get_array()[1].get_int64())});
  return e;
}

redis_store::redis_store(net::any_io_executor executor, const config::redis_settings& settings,
                         redis::store_health& health)
    : executor_(executor),
      prefix_(settings.key_prefix + ":cache:"),
      timeout_(settings.timeout),
      health_(health),
      client_(executor, settings, {}, health) {}

std::string redis_store::redis_key(const std::string& key) const { return prefix_ + key; }

// The reply within redis.timeout, as a budget reservation waits; a reply
// that comes later is dropped.
net::awaitable<std::shared_ptr<const entry>> redis_store::find(
    const std::string& key, wall_clock::time_point now,
    std::optional<std::chrono::seconds> max_age) {
  struct waiting {
    explicit waiting(const net::any_io_executor& ex) : timer(ex) {}
    net::steady_timer timer;
    std::optional<redis::reply> got;
    bool done = false;
  };
  auto w = std::make_shared<waiting>(executor_);
  client_.send({"GET", redis_key(key)}, [w](std::optional<redis::reply> r) {
    w->done = true;
    w->got = std::move(r);
    w->timer.cancel();
  });
  if (!w->done) {
    w->timer.expires_after(timeout_);
    co_await w->timer.async_wait(use_tuple);
  }
  if (!w->done) {
    health_.failed("no answer within redis.timeout");
    co_return nullptr;
  }
  if (!w->got || w->got->kind != redis::reply::type::bulk) co_return nullptr;
  auto e = deserialized(w->got->text);
  if (!e || e->expires <= now || (max_age && now - e->stored > *max_age)) co_return nullptr;
  co_return e;
}

void redis_store::keep(const std::string& key, const entry& e, std::function<void()> kept) {
  auto ttl = std::chrono::duration_cast<milliseconds>(e.expires - wall_clock::now());
  if (ttl.count() <= 0) return;
  auto value = serialized(e);
  if (value.size() > static_cast<std::size_t>(redis::max_bulk_bytes)) return;
  client_.send({"SET", redis_key(key), std::move(value), "PX", std::to_string(ttl.count())},
               [kept = std::move(kept)](std::optional<redis::reply> r) {
                 if (r && !r->is_error()) kept();
               });
}

}  // namespace tokengate::cache
