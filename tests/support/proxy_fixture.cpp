#include "support/proxy_fixture.hpp"

#include <boost/json/parse.hpp>
#include <spdlog/spdlog.h>

#include <thread>

#include "config/config.hpp"

namespace tokengate::test {

proxy_fixture::proxy_fixture(fixture_options options) {
  spdlog::set_level(spdlog::level::warn);
  config::demo_engine_settings engine_settings;
  engine_settings.port = 0;
  engine_settings.prefill_base = std::chrono::milliseconds(5);
  engine_settings.prefill_ms_per_1k_tokens = 10;
  engine_settings.decode_tokens_per_second = options.decode_tokens_per_second;
  engine_settings.default_output_tokens = 10;
  engine_ = std::make_unique<engine::demo_engine>(engine_settings);
  engine_->start();

  auto base_url = options.base_url.empty() ? "http://127.0.0.1:" + std::to_string(engine_->port()) + "/v1"
                                           : options.base_url;
  std::string yaml =
      "log_level: warn\n"
      "workers: 2\n"
      "drain_timeout: 2s\n"
      "listeners:\n"
      "  - name: main\n"
      "    address: 127.0.0.1\n"
      "    port: 0\n"
      "    upstream: demo\n" +
      options.listener_extra +
      "upstreams:\n"
      "  demo:\n"
      "    base_url: " + base_url + "\n" +
      options.upstream_extra +
      "admin:\n"
      "  port: 0\n" +
      options.top_extra;
  server_ = std::make_unique<server>(config::load_config_text(yaml, "fixture.yaml"));
  server_->start();
}

proxy_fixture::~proxy_fixture() {
  server_->drain_and_stop();
  engine_->stop();
}

boost::json::object proxy_fixture::engine_last_request() {
  auto r = http_get(engine_->port(), "/demo/stats");
  return boost::json::parse(r.body).as_object().at("last_request").as_object();
}

testing::AssertionResult wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                                    const std::string& what) {
  auto deadline = clock::now() + timeout;
  while (clock::now() < deadline) {
    if (condition()) return testing::AssertionSuccess();
    std::this_thread::sleep_for(2ms);
  }
  if (condition()) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "timed out after " << timeout.count() << " ms waiting for " << what;
}

http_response http_get(std::uint16_t port, const std::string& path) {
  http_client c(port);
  c.send("GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  return read_response(c);
}

}  // namespace tokengate::test
