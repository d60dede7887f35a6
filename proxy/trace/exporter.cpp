#include "trace/exporter.hpp"

#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "http/read_message.hpp"
#include "http/response_head.hpp"
#include "io/tls_context.hpp"
#include "io/write_all.hpp"
#include "metrics/prometheus_text.hpp"
#include "trace/otlp_json.hpp"
#include "upstream/pool.hpp"
#include "upstream/target_url.hpp"

namespace tokengate::trace {
namespace {

using steady = std::chrono::steady_clock;

std::string instance_id(const config::tracing_settings& s) {
  if (!s.service_instance_id.empty()) return s.service_instance_id;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(::getpid());
}

std::vector<std::pair<std::string, std::string>> resource_of(const config::tracing_settings& s) {
  std::vector<std::pair<std::string, std::string>> r{{"service.name", s.service_name},
                                                     {"service.instance.id", instance_id(s)},
                                                     {"service.version", TOKENGATE_VERSION},
                                                     {"telemetry.sdk.name", "tokengate"},
                                                     {"telemetry.sdk.language", "cpp"}};
  for (const auto& kv : s.resource) r.push_back(kv);
  return r;
}

// The collector as an upstream: its own connection each export.
config::upstream collector_settings(const config::tracing_settings& s) {
  config::upstream u;
  u.name = "otlp-collector";
  u.base_url = s.endpoint;
  u.ca_file = s.ca_file;
  u.timeouts.connect = s.timeout;
  return u;
}

}  // namespace

// One POST on a fresh connection, on an io_context of the exporter's
// thread: the status, or 0 and why there was none.
struct exporter::connection {
  explicit connection(const config::tracing_settings& s)
      : settings(collector_settings(s)), url(*upstream::parse_target_url(s.endpoint)) {
    std::shared_ptr<net::ssl::context> tls;
    if (url.tls) tls = make_client_tls_context(s.ca_file);
    pool = std::make_unique<upstream::pool>(io.get_executor(), settings, url, tls);
    path = url.path_prefix.empty() ? "/v1/traces" : url.path_prefix;
  }

  std::pair<unsigned, std::string> post(const std::string& request,
                                        std::chrono::milliseconds timeout) {
    unsigned status = 0;
    std::string failure;
    net::co_spawn(
        io,
        [&]() -> net::awaitable<void> {
          auto acquired = co_await pool->connect_new();
          if (!acquired.conn) {
            failure = acquired.message;
            co_return;
          }
          auto& stream = acquired.conn->stream;
          stream.expires_after(timeout);
          const std::array<net::const_buffer, 1> pieces{net::buffer(request)};
          auto [wec, n] = co_await write_all(stream, pieces);
          beast::flat_buffer buffer;
          response_head head;
          auto ec = wec ? wec : co_await read_response_head(stream, buffer, head, 64 * 1024);
          if (ec)
            failure = ec == beast::error::timeout ? "no answer within the timeout" : ec.message();
          else
            status = head.status;
          stream.close();
        },
        net::detached);
    io.restart();
    io.run();
    return {status, failure};
  }

  net::io_context io{1};
  config::upstream settings;
  upstream::target_url url;
  std::unique_ptr<upstream::pool> pool;
  std::string path;
};

exporter::exporter(config::tracing_settings settings)
    : settings_(std::move(settings)),
      resource_(resource_of(settings_)),
      http_(std::make_unique<connection>(settings_)) {
  thread_ = std::thread([this] {
    // The export's work (a batch's JSON, its write) yields to the workers
    // on a busy core: at normal priority a 512-span batch took the core
    // from the relay for milliseconds at a time (scenario 2tr: TTFT p99
    // +5.5 ms). Idle priority: it runs when nothing else would, and a
    // queue that fills meanwhile drops and counts.
    sched_param none{};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);
    run();
  });
}

exporter::~exporter() { drain(std::chrono::milliseconds(0)); }

void exporter::submit(std::vector<span> spans) {
  std::lock_guard lock(mutex_);
  if (stopping_ || queue_.size() + spans.size() > settings_.queue_spans) {
    dropped_ += spans.size();
    return;
  }
  for (auto& s : spans) queue_.push_back(std::move(s));
  if (queue_.size() >= settings_.batch_spans) wake_.notify_one();
}

void exporter::drain(std::chrono::milliseconds within) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    drain_deadline_ = steady::now() + within;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

std::vector<span> exporter::take_batch() {
  std::vector<span> batch;
  auto n = std::min(queue_.size(), settings_.batch_spans);
  batch.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return batch;
}

void exporter::run() {
  for (;;) {
    std::vector<span> batch;
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, settings_.export_interval,
                     [&] { return stopping_ || queue_.size() >= settings_.batch_spans; });
      stopping = stopping_;
      batch = take_batch();
      if (stopping && steady::now() >= drain_deadline_) {  // no time left: what is queued is lost
        dropped_ += batch.size() + queue_.size();
        queue_.clear();
        return;
      }
    }
    if (batch.empty()) {
      if (stopping) return;
      continue;
    }
    auto give_up = stopping ? drain_deadline_ : steady::now() + settings_.export_interval * 10;
    if (send_with_retries(otlp_json(resource_, batch), give_up))
      exported_ += batch.size();
    else
      dropped_ += batch.size();
  }
}

// A drain begun meanwhile brings the batch's last moment forward.
steady::time_point exporter::sooner_if_draining(steady::time_point give_up) {
  std::lock_guard lock(mutex_);
  return stopping_ ? std::min(give_up, drain_deadline_) : give_up;
}

// The batch's POST, tried again after 100 ms, 200 ms, … while the
// collector is unreachable, overloaded (429, 5xx) and time is left; false
// when it never took it.
bool exporter::send_with_retries(const std::string& body, steady::time_point give_up) {
  std::string request =
      "POST " + http_->path + " HTTP/1.1\r\nHost: " + http_->url.host_header +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n";
  for (const auto& [name, value] : settings_.headers) request += name + ": " + value + "\r\n";
  request += "\r\n" + body;
  auto pause = std::chrono::milliseconds(100);
  for (int attempt = 0;; ++attempt) {
    give_up = sooner_if_draining(give_up);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - steady::now());
    auto [status, failure] = http_->post(
        request, std::max(std::chrono::milliseconds(1), std::min(settings_.timeout, left)));
    if (status >= 200 && status < 300) return true;
    ++failures_;
    bool retryable = status == 0 || status == 429 || status >= 500;
    if (failures_ == 1 ||
        failures_ % 1000 == 0)  // (once, then rarely: a dead collector is not news)
      spdlog::warn("trace export to {} failed ({} so far): {}", settings_.endpoint,
                   failures_.load(), status ? "status " + std::to_string(status) : failure);
    if (!retryable || attempt >= settings_.retries ||
        steady::now() + pause >= sooner_if_draining(give_up))
      return false;
    std::this_thread::sleep_for(pause);
    pause *= 2;
  }
}

std::string exporter::prometheus() const {
  metrics::prometheus_text out;
  out.family("tokengate_trace_spans_exported_total", metrics::metric_type::counter,
             "Spans the OTLP collector accepted.");
  out.sample(exported_.load());
  out.family("tokengate_trace_spans_dropped_total", metrics::metric_type::counter,
             "Spans never exported: the queue was full, or their batch failed every try.");
  out.sample(dropped_.load());
  out.family("tokengate_trace_export_failures_total", metrics::metric_type::counter,
             "Export requests the collector did not take (each try counts).");
  out.sample(failures_.load());
  return out.take();
}

}  // namespace tokengate::trace
