#pragma once
// A real demo engine and a real proxy server on 127.0.0.1 ephemeral ports,
// in this process, talking over real sockets.
#include <boost/json/object.hpp>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "engine/demo_engine.hpp"
#include "server/server.hpp"
#include "support/http_client.hpp"

namespace tokengate::test {

struct fixture_options {
  std::string upstream_extra;  // YAML lines appended under upstreams.demo (4-space indent)
  std::string top_extra;       // YAML appended at the top level (e.g. a limits block)
  std::string listener_extra;  // YAML lines appended to the listener (4-space indent)
  std::string base_url;        // overrides the demo engine URL
  double decode_tokens_per_second = 200;
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
  server& proxy() { return *server_; }

 private:
  std::unique_ptr<engine::demo_engine> engine_;
  std::unique_ptr<server> server_;
};

// Polls `condition` every 2 ms until it holds or the timeout passes.
testing::AssertionResult wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                                    const std::string& what);

// A simple GET on a port, returning the response.
http_response http_get(std::uint16_t port, const std::string& path);

}  // namespace tokengate::test
