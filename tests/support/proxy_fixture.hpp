#pragma once
// A real demo engine and a real proxy server on 127.0.0.1 ephemeral ports,
// in this process, talking over real sockets.
#include <gtest/gtest.h>

#include <boost/json/object.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "engine/demo_engine.hpp"
#include "server/server.hpp"
#include "support/http_client.hpp"

namespace tokengate::test {

struct fixture_options {
  std::string upstream_extra;  // YAML lines appended under upstreams.demo (4-space indent)
  std::string top_extra;       // YAML appended at the top level (e.g. a limits block)
  std::string listener_extra;  // YAML lines appended to the listener (4-space indent)
  std::string base_url;        // overrides the demo engine URL
  std::string more_upstreams;  // YAML appended under upstreams: (2-space indent)
  double decode_tokens_per_second = 200;
  std::string honour_limit = "any";
  // More demo engines (their port is chosen here); in every YAML string above,
  // {engine} is the main engine's port and {engine1}, {engine2}… theirs.
  std::vector<config::demo_engine_settings> extra_engines;
};

class proxy_fixture {
 public:
  explicit proxy_fixture(fixture_options options = {});
  ~proxy_fixture();

  std::uint16_t port() const { return server_->port("main"); }
  std::uint16_t admin_port() const { return server_->admin_port(); }
  std::uint16_t engine_port() const { return engine_->port(); }
  const engine::demo_stats& engine_stats() const { return engine_->stats(); }
  // The engine's view of the last request it received (method, target, headers, body).
  boost::json::object engine_last_request();
  // GET /demo/stats of the main engine (0) or an extra one (1, 2, …).
  boost::json::object engine_stats_json(std::size_t engine = 0);
  const engine::demo_stats& extra_engine_stats(std::size_t i) const {
    return extra_engines_.at(i - 1)->stats();
  }
  // Replaces the running policy with the fixture's YAML plus `top_extra`.
  void reload_with(const std::string& top_extra);
  // Replaces it with the YAML of the fixture's options as `change` leaves
  // them (e.g. another upstream_extra or base_url); later reloads start
  // from those.
  void reload_with_options(const std::function<void(fixture_options&)>& change);
  server& proxy() { return *server_; }

 private:
  std::string yaml() const;  // the config the options describe

  fixture_options options_;
  std::unique_ptr<engine::demo_engine> engine_;
  std::vector<std::unique_ptr<engine::demo_engine>> extra_engines_;
  std::unique_ptr<server> server_;
};

// Polls `condition` every 2 ms until it holds or the timeout passes.
testing::AssertionResult wait_until(const std::function<bool()>& condition,
                                    std::chrono::milliseconds timeout, const std::string& what);

// A simple GET on a port, returning the response.
http_response http_get(std::uint16_t port, const std::string& path);

// The number a counter or gauge without labels reads on the proxy's
// /metrics; throws when the page has no such line.
std::uint64_t metric(const proxy_fixture& f, const std::string& name);
// The same for a counter bumped when an exchange ends, a moment after the
// client has read its answer: waited for (up to 2 s) while absent or 0.
std::uint64_t metric_once_counted(const proxy_fixture& f, const std::string& name);

// The demo engine's content tokens in a chat stream's `data:` lines (the
// body, or the raw bytes of a chunked one: each event is whole inside one
// HTTP chunk): how many, and whether each was the engine's next. Throws on
// a torn event.
struct demo_tokens {
  std::size_t seen = 0;
  bool in_order = true;
};
demo_tokens demo_tokens_in(std::string_view stream);

}  // namespace tokengate::test
