#include "fleet/prober.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "fleet/engine_gauges.hpp"
#include "http/read_message.hpp"
#include "http/response_head.hpp"
#include "io/write_all.hpp"

namespace tokengate::fleet {

using steady = std::chrono::steady_clock;

namespace {

constexpr auto tick = std::chrono::milliseconds(100);
constexpr std::size_t max_page_bytes = 4 * 1024 * 1024;

struct got_page {
  unsigned status = 0;  // 0: no answer
  std::string body;
  std::string failure;  // why there was no answer
};

std::string get_request(const config::upstream& u, const upstream::target_url& url,
                        const std::string& path) {
  // HTTP/1.0: the answer is never chunked and ends with the connection.
  std::string r = "GET " + path + " HTTP/1.0\r\nHost: " + url.host_header +
                  "\r\nUser-Agent: tokengate-probe\r\nAccept: */*\r\n";
  if (!u.api_key.empty()) {
    if (u.kind == config::provider_kind::anthropic)
      r += "x-api-key: " + u.api_key + "\r\nanthropic-version: 2023-06-01\r\n";
    else
      r += "Authorization: Bearer " + u.api_key + "\r\n";
  }
  return r + "\r\n";
}

// One GET on a fresh connection, all of it within `timeout`; the body is
// read only when `want_body`.
net::awaitable<got_page> get(upstream::pool& pool, const config::upstream& u,
                             const std::string& path, std::chrono::milliseconds timeout,
                             bool want_body) {
  got_page page;
  auto acquired = co_await pool.connect_new();
  if (!acquired.conn) {
    page.failure = acquired.message;
    co_return page;
  }
  auto& stream = acquired.conn->stream;
  stream.expires_after(timeout);
  const auto request = get_request(u, pool.url(), path);
  const std::array<net::const_buffer, 1> pieces{net::buffer(request)};
  auto [wec, written] = co_await write_all(stream, pieces);
  beast::flat_buffer buffer;
  response_head head;
  auto ec = wec ? wec : co_await read_response_head(stream, buffer, head, 64 * 1024);
  if (ec) {
    page.failure = ec == beast::error::timeout ? "no answer within the timeout" : ec.message();
    co_return page;
  }
  page.status = head.status;
  if (!want_body) co_return page;
  const auto first = buffer.data();
  page.body.assign(static_cast<const char*>(first.data()), first.size());
  std::array<char, 16 * 1024> chunk;
  while (page.body.size() < max_page_bytes) {
    auto [rec, n] = co_await stream.async_read_some(net::buffer(chunk), use_tuple);
    page.body.append(chunk.data(), n);
    if (rec) break;  // (the end of the page, or of what the timeout allowed)
  }
  co_return page;
}

}  // namespace

void prober::start(net::any_io_executor executor) {
  net::co_spawn(executor, loop(), net::detached);
}

net::awaitable<void> prober::loop() {
  net::steady_timer timer(co_await net::this_coro::executor);
  for (;;) {
    auto cfg = snapshot_();
    const auto now = steady::now();
    for (const auto& [name, u] : cfg->upstreams) {
      auto& t = tracks_[name];
      if (u.health_check && !t.checking && now >= t.next_check) {
        t.checking = true;
        t.next_check = now + u.health_check->interval;
        net::co_spawn(timer.get_executor(), check(cfg, name), net::detached);
      }
      if (u.engine_metrics && !t.reading && now >= t.next_metrics) {
        t.reading = true;
        t.next_metrics = now + u.engine_metrics->interval;
        net::co_spawn(timer.get_executor(), read_metrics(cfg, name), net::detached);
      }
      if (!u.health_check) board_.load_of(name).probed_healthy = true;  // (a reload removed it)
    }
    timer.expires_after(tick);
    auto [ec] = co_await timer.async_wait(use_tuple);
    if (ec) co_return;
  }
}

net::awaitable<void> prober::check(std::shared_ptr<const config::config> cfg, std::string name) {
  const auto& u = cfg->upstreams.at(name);
  got_page page;
  try {
    auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(u.health_check->timeout);
    page = co_await get(pools_.pool_for(u), u, u.health_check->path, timeout, false);
  } catch (const std::exception& e) {
    page.failure = e.what();
  }
  const bool passed = page.status >= 200 && page.status < 300;
  judge(u, passed,
        page.status ? "status " + std::to_string(page.status) + " on " + u.health_check->path
                    : page.failure);
  tracks_[name].checking = false;
}

namespace {

void health_changed(upstream_load& load, bool healthy) {
  load.probed_healthy = healthy;
  load.health_changed_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
}

}  // namespace

void prober::judge(const config::upstream& u, bool passed, const std::string& why) {
  auto& t = tracks_[u.name];
  auto& load = board_.load_of(u.name);
  const auto& h = *u.health_check;
  if (passed) {
    t.failures = 0;
    if (++t.passes >= h.healthy_after && !load.probed_healthy) {
      health_changed(load, true);
      spdlog::info("upstream '{}' passed {} health checks in a row: back in rotation", u.name,
                   t.passes);
    }
    return;
  }
  t.passes = 0;
  if (++t.failures >= h.unhealthy_after && load.probed_healthy) {
    health_changed(load, false);
    spdlog::warn(
        "upstream '{}' failed {} health checks in a row ({}): out of rotation until it "
        "passes {}",
        u.name, t.failures, why, h.healthy_after);
  }
}

net::awaitable<void> prober::read_metrics(std::shared_ptr<const config::config> cfg,
                                          std::string name) {
  const auto& u = cfg->upstreams.at(name);
  auto& load = board_.load_of(name);
  std::optional<engine_gauges> gauges;
  try {
    auto timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(u.engine_metrics->interval);
    auto page = co_await get(pools_.pool_for(u), u, u.engine_metrics->path, timeout, true);
    if (page.status == 200) gauges = read_engine_gauges(page.body);
  } catch (const std::exception&) {
  }
  // Unknown again when the page cannot be had: stale numbers would steer.
  load.engine_running = gauges ? static_cast<int>(gauges->running) : -1;
  load.engine_waiting = gauges ? static_cast<int>(gauges->waiting) : -1;
  if (gauges && gauges->kv_tokens) load.engine_kv_tokens = *gauges->kv_tokens;  // (it stays)
  tracks_[name].reading = false;
}

}  // namespace tokengate::fleet
