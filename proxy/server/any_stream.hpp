#pragma once
// A byte stream that is either plain TCP or TLS over TCP, chosen at run time.
// Sessions and the relay are written once against this type instead of being
// templated on the stream (fewer instantiations, a faster build), and both
// the client side and the upstream side use it.
#include <boost/asio/async_result.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include <memory>
#include <optional>
#include <span>

#include "net.hpp"

namespace tokengate {

class any_stream {
 public:
  using executor_type = beast::tcp_stream::executor_type;
  using tls_stream = net::ssl::stream<beast::tcp_stream>;

  explicit any_stream(beast::tcp_stream plain) : plain_(std::move(plain)) {}
  // `context` is kept as long as the stream: a certificate reload may drop
  // the listener's reference while this connection still uses it.
  explicit any_stream(std::unique_ptr<tls_stream> tls, std::shared_ptr<net::ssl::context> context = nullptr)
      : context_(std::move(context)), tls_(std::move(tls)) {}
  any_stream(any_stream&&) = default;
  any_stream& operator=(any_stream&&) = default;

  bool is_tls() const { return tls_ != nullptr; }
  tls_stream& tls() { return *tls_; }

  // The TCP layer: timeouts (expires_after), socket options and close.
  beast::tcp_stream& tcp() { return tls_ ? tls_->next_layer() : *plain_; }
  executor_type get_executor() { return tcp().get_executor(); }

  template <typename Buffers, typename Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    return net::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const Buffers& b) {
          if (tls_) tls_->async_read_some(b, std::move(handler));
          else plain_->async_read_some(b, std::move(handler));
        },
        token, buffers);
  }

  template <typename Buffers, typename Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    return net::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const Buffers& b) {
          if (tls_) tls_->async_write_some(b, std::move(handler));
          else plain_->async_write_some(b, std::move(handler));
        },
        token, buffers);
  }

  // The same stream without Beast's per-operation timeouts, for a caller
  // that keeps its own deadlines (the relay's stall watch) and has called
  // tcp().expires_never(). Beast's tcp_stream wraps every operation in one
  // of its own (a shared state, a work guard, timer checks) even when no
  // timeout is set; on plain TCP this goes to the socket directly.
  class untimed_stream {
   public:
    using executor_type = any_stream::executor_type;
    explicit untimed_stream(any_stream& s) : s_(s) {}
    executor_type get_executor() { return s_.get_executor(); }

    template <typename Buffers, typename Token>
    auto async_read_some(const Buffers& buffers, Token&& token) {
      return net::async_initiate<Token, void(error_code, std::size_t)>(
          [this](auto handler, const Buffers& b) {
            if (s_.tls_) s_.tls_->async_read_some(b, std::move(handler));
            else s_.plain_->socket().async_read_some(b, std::move(handler));
          },
          token, buffers);
    }

    template <typename Buffers, typename Token>
    auto async_write_some(const Buffers& buffers, Token&& token) {
      return net::async_initiate<Token, void(error_code, std::size_t)>(
          [this](auto handler, const Buffers& b) {
            if (s_.tls_) s_.tls_->async_write_some(b, std::move(handler));
            else s_.plain_->socket().async_write_some(b, std::move(handler));
          },
          token, buffers);
    }

   private:
    any_stream& s_;
  };
  untimed_stream untimed() { return untimed_stream(*this); }

  // Plain TCP: gives the bytes to the kernel now, without waiting (one
  // sendmsg with MSG_DONTWAIT), and returns how many it took: usually all of
  // them. An asynchronous write costs far more for the same syscall: the
  // operation is set up, its completion queued on the scheduler, and the
  // coroutine suspended and resumed (tests/bench/ab_cpu.sh: 6 % less CPU
  // per event on fast streams with this). TLS streams take nothing here
  // (0): their bytes must go through the TLS engine. `ec` is set on a real
  // error, never on "would block". At most 64 buffers and send_now_limit
  // bytes are passed; the rest is left to the caller.
  std::size_t send_now(std::span<const net::const_buffer> buffers, error_code& ec);
  // One worker thread serves every connection, and a send holds it for as
  // long as the kernel copies (on loopback also delivering to the reader):
  // a 4 MB prompt sent in one call held the loop for milliseconds, and every
  // other stream's next event waited (scenario 6's TTFT p99, 10 ms above
  // nginx's with one 4 MB prompt among 63 of 200 KB). 256 KiB takes one call
  // for a 200 KB prompt; the rest of a larger one goes out through Asio's
  // write, 64 KiB a call, with other connections served between calls.
  static constexpr std::size_t send_now_limit = 256 * 1024;

  // Closes the socket now: every pending operation completes with an error.
  void close() { tcp().close(); }

  // Orderly end: TLS close_notify (bounded by a short timeout), then FIN.
  net::awaitable<void> graceful_close();

 private:
  std::optional<beast::tcp_stream> plain_;
  std::shared_ptr<net::ssl::context> context_;  // declared before tls_: outlives it
  std::unique_ptr<tls_stream> tls_;  // heap: ssl::stream is not movable cheaply
};

// An ordinary way for a peer to go away; not worth a warning in the log.
bool is_disconnect(const error_code& ec);

}  // namespace tokengate
