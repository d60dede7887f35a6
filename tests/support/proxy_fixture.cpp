#include "support/proxy_fixture.hpp"

#include <spdlog/spdlog.h>

#include <boost/json/parse.hpp>
#include <stdexcept>
#include <thread>

#include "config/config.hpp"
#include "engine/demo_text.hpp"

namespace tokengate::test {

proxy_fixture::proxy_fixture(fixture_options options) : options_(std::move(options)) {
  spdlog::set_level(spdlog::level::warn);
  config::demo_engine_settings engine_settings;
  engine_settings.port = 0;
  engine_settings.prefill_base = std::chrono::milliseconds(5);
  engine_settings.prefill_ms_per_1k_tokens = 10;
  engine_settings.decode_tokens_per_second = options_.decode_tokens_per_second;
  engine_settings.default_output_tokens = 10;
  engine_settings.honour_limit = options_.honour_limit;
  engine_ = std::make_unique<engine::demo_engine>(engine_settings);
  engine_->start();
  for (auto settings : options_.extra_engines) {
    settings.port = 0;
    extra_engines_.push_back(std::make_unique<engine::demo_engine>(settings));
    extra_engines_.back()->start();
  }
  server_ = std::make_unique<server>(config::load_config_text(yaml(), "fixture.yaml"));
  server_->start();
}

std::string proxy_fixture::yaml() const {
  auto base_url = options_.base_url.empty() ? "http://127.0.0.1:{engine}/v1" : options_.base_url;
  std::string yaml =
      "log_level: warn\n"
      "workers: 2\n"
      "drain_timeout: 2s\n"
      "listeners:\n"
      "  - name: main\n"
      "    address: 127.0.0.1\n"
      "    port: 0\n"
      "    upstream: demo\n" +
      options_.listener_extra +
      "upstreams:\n"
      "  demo:\n"
      "    base_url: " +
      base_url + "\n" + options_.upstream_extra + options_.more_upstreams +
      "admin:\n"
      "  port: 0\n" +
      options_.top_extra;
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (auto pos = yaml.find(from); pos != std::string::npos;
         pos = yaml.find(from, pos + to.size()))
      yaml.replace(pos, from.size(), to);
  };
  replace_all("{engine}", std::to_string(engine_->port()));
  for (std::size_t i = 0; i < extra_engines_.size(); ++i)
    replace_all("{engine" + std::to_string(i + 1) + "}", std::to_string(extra_engines_[i]->port()));
  return yaml;
}

void proxy_fixture::reload_with(const std::string& top_extra) {
  reload_with_options([&](fixture_options& o) { o.top_extra = top_extra; });
}

void proxy_fixture::reload_with_options(const std::function<void(fixture_options&)>& change) {
  change(options_);
  server_->reload(config::load_config_text(yaml(), "fixture-reload.yaml"));
}

boost::json::object proxy_fixture::engine_stats_json(std::size_t engine) {
  auto port = engine == 0 ? engine_->port() : extra_engines_.at(engine - 1)->port();
  return boost::json::parse(http_get(port, "/demo/stats").body).as_object();
}

proxy_fixture::~proxy_fixture() {
  server_->drain_and_stop();
  engine_->stop();
  for (auto& e : extra_engines_) e->stop();
}

boost::json::object proxy_fixture::engine_last_request() {
  auto r = http_get(engine_->port(), "/demo/stats");
  return boost::json::parse(r.body).as_object().at("last_request").as_object();
}

testing::AssertionResult wait_until(const std::function<bool()>& condition,
                                    std::chrono::milliseconds timeout, const std::string& what) {
  auto deadline = clock::now() + timeout;
  while (clock::now() < deadline) {
    if (condition()) return testing::AssertionSuccess();
    std::this_thread::sleep_for(2ms);
  }
  if (condition()) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "timed out after " << timeout.count() << " ms waiting for " << what;
}

http_response http_get(std::uint16_t port, const std::string& path) {
  http_client c(port);
  c.send("GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  return read_response(c);
}

std::uint64_t metric(const proxy_fixture& f, const std::string& name) {
  auto text = http_get(f.admin_port(), "/metrics").body;
  auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) throw std::runtime_error("no metric " + name);
  return std::stoull(text.substr(at + name.size() + 2));
}

std::uint64_t metric_once_counted(const proxy_fixture& f, const std::string& name) {
  std::uint64_t n = 0;
  (void)wait_until(
      [&] {
        auto text = http_get(f.admin_port(), "/metrics").body;
        auto at = text.find("\n" + name + " ");
        n = at == std::string::npos ? 0 : std::stoull(text.substr(at + name.size() + 2));
        return n > 0;
      },
      std::chrono::seconds(2), name);
  return n;
}

demo_tokens demo_tokens_in(std::string_view stream) {
  demo_tokens out;
  std::size_t at = 0;
  for (auto line_end = stream.find('\n'); line_end != std::string_view::npos;
       line_end = stream.find('\n', at)) {
    auto line = stream.substr(at, line_end - at);
    at = line_end + 1;
    if (!line.starts_with("data: {")) continue;
    auto event = boost::json::parse(line.substr(6));
    const auto& delta = event.at("choices").at(0).at("delta").as_object();
    if (!delta.contains("content") || delta.contains("role"))
      continue;  // (the role comes first, empty)
    out.in_order = out.in_order && delta.at("content").as_string() == engine::demo_token(out.seen);
    ++out.seen;
  }
  return out;
}

}  // namespace tokengate::test
