#pragma once
// Keep-alive connections to one upstream, owned by one worker thread (so no
// locks: only that thread's io_context ever touches it).
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "io/any_stream.hpp"
#include "metrics/counters.hpp"
#include "upstream/target_url.hpp"
#include "upstream/tls_resumption.hpp"

namespace tokengate::upstream {

// Why a connection could not be had; decides 502 vs 504 and the error code.
enum class connect_failure { none, resolve, refused, timeout, tls };

struct connection {
  any_stream stream;
  bool reused = false;  // came from the idle pool: a failure before any byte may be a stale socket
  std::chrono::steady_clock::time_point pooled_at;  // when it last went back to the pool
};

struct acquire_result {
  std::unique_ptr<connection> conn;
  connect_failure failure = connect_failure::none;
  std::string message;  // for the log and the client's error body (no secrets in here)
};

class pool {
 public:
  pool(net::any_io_executor executor, const config::upstream& settings, target_url url,
       std::shared_ptr<net::ssl::context> tls_context, metrics::shard* metrics = nullptr);

  const config::upstream& settings() const { return settings_; }
  const target_url& url() const { return url_; }

  // An idle pooled connection if a live one exists, else a new one.
  net::awaitable<acquire_result> acquire();
  net::awaitable<acquire_result> connect_new();

  // Gives a connection back after a complete response with keep-alive.
  void release(std::unique_ptr<connection> conn);

  // Closes the idle connections the upstream has closed (or sent stray
  // bytes on) since they were given back, and those that have waited
  // longer than timeouts.pooled, and returns how many. Without it, a
  // connection the upstream closed waits in CLOSE_WAIT, holding its
  // descriptor and memory, until a request would take it: engines close
  // idle keep-alive connections after a few seconds (uvicorn, under vLLM
  // and SGLang, after 5), and a quiet proxy would keep a pool of dead
  // sockets. Costs no syscall for a connection the loop has had no report of.
  std::size_t close_stale(
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  std::size_t idle_count() const { return idle_.size(); }

  // A reload kept this pool (same name, URL and CA) and may have changed
  // the rest of its upstream's settings: its connect timeout, longest wait
  // and size apply from now on, and the idle connections over a smaller
  // size are closed at once, the longest-idle first.
  void adopt(const config::upstream& settings);
  // A reload dropped or moved this pool's upstream: no new request comes
  // here, so its idle connections close now, and those in use close when
  // their request ends instead of coming back.
  void retire();

 private:
  // connect_new's steps: the TCP connection (the failure, or nothing),
  // then TLS on it where the URL asks for it.
  net::awaitable<std::optional<acquire_result>> connect_tcp(beast::tcp_stream& tcp_stream);
  net::awaitable<acquire_result> handshake_tls(tcp::socket socket);

  net::any_io_executor executor_;
  config::upstream settings_;
  target_url url_;
  std::shared_ptr<net::ssl::context> tls_context_;
  std::deque<std::unique_ptr<connection>> idle_;
  metrics::shard* metrics_;  // the worker's: the pooled connections gauge, TLS handshakes
  // The session the next TLS connection offers (upstream/tls_resumption.hpp).
  std::shared_ptr<latest_session> tls_sessions_;
  // The address itself when the URL names one (a local engine's usual
  // 127.0.0.1): no resolver for each new connection.
  std::optional<tcp::endpoint> literal_endpoint_;
};

}  // namespace tokengate::upstream
