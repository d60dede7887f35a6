#pragma once
// A byte stream that is either plain TCP or TLS over TCP, chosen at run time.
// Sessions and the relay are written once against this type instead of being
// templated on the stream (fewer instantiations, a faster build), and both
// the client side and the upstream side use it.
#include <array>
#include <boost/asio/append.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/error.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "io/drained_read.hpp"
#include "io/net.hpp"
#include "io/stream_deadline.hpp"
#include "io/tls_direct.hpp"

namespace tokengate {

// A completion handler that reports any failure on a connection whose
// deadline has passed as beast::error::timeout (the close that ended it
// shows up as "operation aborted" or "bad descriptor"), as Beast's timed
// operations do. The wrapped handler's executor, allocator and cancellation
// slot stay its own (see the associator below).
template <typename Handler>
struct deadline_aware_handler {
  Handler handler;
  std::shared_ptr<const bool> deadline_expired;

  void operator()(error_code ec, std::size_t n) {
    if (ec && *deadline_expired) ec = beast::error::timeout;
    std::move(handler)(ec, n);
  }
};

// An operation on a TLS stream (tls_direct.hpp): the call is tried again
// each time the socket is ready for what it said it needs, then the
// handler gets its outcome.
template <typename Attempt, typename Handler>
struct tls_direct_op {
  tcp::socket* socket;
  Attempt attempt;
  Handler handler;

  void operator()(error_code ec) {  // (the wait's end: an error when the socket was closed)
    if (ec) {
      std::move(handler)(ec, 0);
      return;
    }
    auto r = attempt();
    if (r.wait == tls_direct::wait_for::nothing)
      std::move(handler)(r.ec, r.bytes);
    else
      wait(r.wait);
  }
  void wait(tls_direct::wait_for what) {
    auto kind =
        what == tls_direct::wait_for::readable ? tcp::socket::wait_read : tcp::socket::wait_write;
    socket->async_wait(kind, std::move(*this));
  }
};

// The end of a direct TLS read queued on the reactor (any_stream's
// start_direct_read): the handler's, unless OpenSSL had to write first and
// the socket had no room (`would_block`): then the read goes on as a
// tls_direct_op that waits for room.
template <typename ReadOnce, typename Handler>
struct tls_direct_read_done {
  tcp::socket* socket;
  ReadOnce read_once;
  Handler handler;

  void operator()(error_code ec, std::size_t n) {
    if (ec != net::error::would_block) {
      std::move(handler)(ec, n);
      return;
    }
    tls_direct_op<ReadOnce, Handler>{socket, std::move(read_once), std::move(handler)}.wait(
        tls_direct::wait_for::writable);
  }
};

enum class tls_role { client, server };

class any_stream {
 public:
  using executor_type = tcp::socket::executor_type;

  explicit any_stream(tcp::socket plain)
      : plain_(std::move(plain)), deadline_(plain_->get_executor(), closer()), reactor_(*plain_) {}
  // TLS, OpenSSL reading and writing the socket itself from the handshake
  // on (tls_direct.hpp). `context` is kept as long as the stream: a
  // certificate reload may drop the listener's reference while this
  // connection still uses it. Throws as Asio's ssl::stream does when
  // OpenSSL cannot make the connection's state (out of memory).
  any_stream(tcp::socket socket, std::shared_ptr<net::ssl::context> context, tls_role role);
  // (The deadline closes whichever object holds the connection now.)
  any_stream(any_stream&& other)
      : plain_(std::move(other.plain_)),
        context_(std::move(other.context_)),
        direct_(std::move(other.direct_)),
        deadline_(std::move(other.deadline_)),
        reactor_(other.reactor_) {
    deadline_.rebind(closer());
  }
  any_stream& operator=(any_stream&&) = delete;  // (the deadline would close the wrong connection)

  bool is_tls() const { return direct_ != nullptr; }
  // OpenSSL's connection (TLS only): SNI, the host to verify, a session to
  // offer before the handshake; whether it was resumed after.
  SSL* native_tls() { return direct_->ssl; }
  // The TLS handshake, bounded by the deadline (beast::error::timeout when
  // it passed). Afterwards the first read tries at once: the handshake's
  // last flight may have brought records of the request with it, which
  // OpenSSL has read ahead and the socket will not report again.
  net::awaitable<error_code> tls_handshake();

  // The TCP socket under either: socket options, cancel.
  tcp::socket& socket() { return direct_ ? direct_->socket : *plain_; }
  executor_type get_executor() { return socket().get_executor(); }

  // Every operation on the connection from now on, until the deadline is
  // moved or cleared, must end by then; when it passes the connection is
  // closed and each operation fails with beast::error::timeout.
  template <typename Rep, typename Period>
  void expires_after(std::chrono::duration<Rep, Period> limit) {
    deadline_.expires_at(stream_deadline::clock::now() + limit);
  }
  void expires_at(stream_deadline::clock::time_point at) { deadline_.expires_at(at); }
  void expires_never() { deadline_.expires_never(); }

  template <typename Buffers, typename Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    return net::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const Buffers& b) {
          deadline_aware_handler<decltype(handler)> done{std::move(handler),
                                                         deadline_.expired_flag()};
          if (direct_)
            start_direct_read(first_room(b), std::move(done));
          else if constexpr (std::is_convertible_v<Buffers, net::mutable_buffer>)
            start_drained_read(*plain_, reactor_, b, std::move(done),
                               nullptr);  // (see drained_read.hpp)
          else
            plain_->async_read_some(b, std::move(done));
        },
        token, buffers);
  }

  // Reads now where the asynchronous read would begin with an attempt
  // anyway (drained_read.hpp's read_now; TLS, an SSL_read): true when it
  // read (bytes, the end or an error), false when the caller is to wait
  // with async_read_some.
  bool read_now(net::mutable_buffer buffer, error_code& ec, std::size_t& n) {
    if (direct_) {
      if (quiet_since_drained(socket()))
        return false;  // (as the plain read_now: a try would find nothing)
      auto r = tls_direct::read(direct_->ssl, buffer);
      if (r.wait == tls_direct::wait_for::readable ||
          (r.wait == tls_direct::wait_for::nothing && r.drained))
        note_would_block(socket());
      if (r.wait != tls_direct::wait_for::nothing) return false;
      ec = r.ec;
      n = r.bytes;
      return true;
    }
    return plain_ && tokengate::read_now(*plain_, buffer, nullptr, ec, n);
  }

  // The peer has had no reason to send anything yet: the next read waits
  // for epoll instead of trying first (drained_read.hpp's
  // wait_for_next_report). Plain TCP only.
  void nothing_to_read_yet() {
    if (plain_) wait_for_next_report(*plain_);
  }

  template <typename Buffers, typename Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    return net::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const Buffers& b) {
          deadline_aware_handler<decltype(handler)> done{std::move(handler),
                                                         deadline_.expired_flag()};
          if (direct_) {
            auto attempt = [this, pieces = first_pieces(b)] {
              return tls_direct::write(direct_->ssl,
                                       std::span(pieces.buffers.data(), pieces.count));
            };
            start_direct(std::move(attempt), std::move(done), false);
          } else {
            plain_->async_write_some(b, std::move(done));
          }
        },
        token, buffers);
  }

  // Plain TCP: gives the bytes to the kernel now, without waiting (one
  // sendmsg with MSG_DONTWAIT), and returns how many it took: usually all of
  // them. An asynchronous write costs far more for the same syscall: the
  // operation is set up, its completion queued on the scheduler, and the
  // coroutine suspended and resumed (tests/bench/ab_cpu.sh: 6 % less CPU
  // per event on fast streams with this). TLS: the same through OpenSSL,
  // a record at a time (send_now_tls). `ec` is set on a real error, never
  // on "would block". At most 64 buffers and send_now_limit bytes are
  // passed; the rest is left to the caller.
  std::size_t send_now(std::span<const net::const_buffer> buffers, error_code& ec);
  // One worker thread serves every connection, and a send holds it for as
  // long as the kernel copies (on loopback also delivering to the reader):
  // a 4 MB prompt sent in one call held the loop for milliseconds, and every
  // other stream's next event waited (scenario 6's TTFT p99, 10 ms above
  // nginx's with one 4 MB prompt among 63 of 200 KB). 256 KiB takes one call
  // for a 200 KB prompt; the rest of a larger one goes out through Asio's
  // write, 64 KiB a call, with other connections served between calls.
  static constexpr std::size_t send_now_limit = 256 * 1024;

  // TLS: whether OpenSSL holds bytes it has read and not yet handed out.
  bool holds_unread_bytes() const { return direct_ && SSL_has_pending(direct_->ssl); }

  // Closes the socket now: every pending operation completes with an error.
  void close() {
    error_code ignored;
    socket().close(ignored);
  }
  // Closed because its deadline passed.
  bool timed_out() const { return deadline_.expired(); }
  // The reactor serving the socket, for a drained_reader of its own.
  const read_reactor& reactor() const { return reactor_; }

  // Orderly end: TLS close_notify (bounded by a short timeout), then FIN.
  net::awaitable<void> graceful_close();
  // The end after an answer sent while the client may still be sending (a
  // head or body over its limit, bad framing): our side is shut (FIN after
  // the answer; over TLS the answer is simply left to be read), then what
  // the client still sends is read and dropped until it closes or `linger`
  // passes. Closing with its bytes unread would reset the connection, and a
  // client still writing would see "connection reset", not our answer
  // (nginx's lingering close, for the same reason).
  net::awaitable<void> lingering_close(std::chrono::milliseconds linger);

 private:
  std::size_t send_now_tls(std::span<const net::const_buffer> buffers, error_code& ec);
  // A direct TLS operation: tried now (its handler then runs as if posted:
  // never inside the call that started it), or, when `wait_first` or the
  // try says so, once the socket is ready.
  template <typename Attempt, typename Handler>
  void start_direct(Attempt attempt, Handler handler, bool wait_first) {
    tls_direct_op<Attempt, Handler> op{&socket(), std::move(attempt), std::move(handler)};
    if (wait_first) return op.wait(tls_direct::wait_for::readable);
    auto r = op.attempt();
    if (r.wait != tls_direct::wait_for::nothing) return op.wait(r.wait);
    net::post(get_executor(), net::append(std::move(op.handler), r.ec, r.bytes));
  }
  // A direct TLS read: queued on the reactor as the plain reads are (no
  // syscall to wait: drained_read.hpp's start_attempted_read), its tries
  // SSL_read. A try that OpenSSL says must first write (a key update's
  // answer into a full socket) ends it, and the read goes on as a
  // tls_direct_op waiting for room. (Not reached through the binary: in
  // Tls.AKeyUpdateAsked... the answer goes out with the proxy's writes
  // waiting, without the read having to wait; TlsDirectOps.* check the
  // branch's steps with scripted answers.) Where the reactor's read
  // cannot be used, a tls_direct_op throughout.
  template <typename Handler>
  void start_direct_read(net::mutable_buffer into, Handler handler) {
    auto read_once = [this, into] { return tls_direct::read(direct_->ssl, into); };
#ifdef TOKENGATE_DRAINED_READ
    using status = net::detail::reactor_op::status;
    auto attempt = [read_once](error_code& ec, std::size_t& n) -> status {
      auto r = read_once();
      if (r.wait == tls_direct::wait_for::readable) return status::not_done;
      if (r.wait == tls_direct::wait_for::writable) {
        ec = net::error::would_block;
        return status::done;
      }
      ec = r.ec;
      n = r.bytes;
      return r.drained ? status::done_and_exhausted : status::done;
    };
    tls_direct_read_done<decltype(read_once), Handler> done{&socket(), read_once,
                                                            std::move(handler)};
    if (start_attempted_read(socket(), reactor_, attempt, done))
      return;  // (takes both only when it starts)
    start_direct(std::move(read_once), std::move(done.handler), quiet_since_drained(socket()));
#else
    start_direct(std::move(read_once), std::move(handler), quiet_since_drained(socket()));
#endif
  }
  template <typename Buffers>
  static net::mutable_buffer first_room(const Buffers& buffers) {
    for (auto it = net::buffer_sequence_begin(buffers); it != net::buffer_sequence_end(buffers);
         ++it)
      if (net::mutable_buffer b = *it; b.size() > 0) return b;
    return {};
  }
  // Up to 16 of a sequence's first buffers: one record's worth is written at
  // a time (tls_direct::write), and an event is three pieces.
  struct some_pieces {
    std::array<net::const_buffer, 16> buffers;
    std::size_t count = 0;
  };
  template <typename Buffers>
  static some_pieces first_pieces(const Buffers& buffers) {
    some_pieces out;
    for (auto it = net::buffer_sequence_begin(buffers);
         it != net::buffer_sequence_end(buffers) && out.count < 16; ++it)
      out.buffers[out.count++] = *it;
    return out;
  }

  std::optional<tcp::socket> plain_;
  std::shared_ptr<net::ssl::context> context_;  // declared before direct_: outlives it
  // TLS, read and written by tls_direct: the socket and OpenSSL's
  // connection, on the heap (OpenSSL's BIO keeps the socket's address).
  struct direct_tls {
    explicit direct_tls(tcp::socket s) : socket(std::move(s)) {}
    direct_tls(const direct_tls&) = delete;
    ~direct_tls() {
      // However the connection ended, its session may still be resumed
      // (upstream/tls_resumption.hpp): OpenSSL would otherwise mark it
      // spent when the connection is freed without a close_notify sent,
      // as a pooled upstream connection is. nginx likewise.
      if (ssl) SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
      SSL_free(ssl);
    }
    tcp::socket socket;
    SSL* ssl = nullptr;
  };
  std::unique_ptr<direct_tls> direct_;
  stream_deadline deadline_;  // declared after the stream it closes
  read_reactor reactor_;  // for reads queued on the reactor (drained_read.hpp), plain or direct TLS
  std::function<void()> closer() {
    return [this] { close(); };
  }
};

// An ordinary way for a peer to go away; not worth a warning in the log.
bool is_disconnect(const error_code& ec);

}  // namespace tokengate

// Asio finds a handler's executor, allocator and cancellation slot through
// associators: the wrappers above pass their wrapped `handler`'s on.
namespace tokengate {
template <template <typename, typename> class Associator, typename Wrapper, typename Handler,
          typename DefaultCandidate>
struct wrapped_handler_associator : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(const Wrapper& w) noexcept {
    return Associator<Handler, DefaultCandidate>::get(w.handler);
  }
  static auto get(const Wrapper& w, const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(w.handler, c)) {
    return Associator<Handler, DefaultCandidate>::get(w.handler, c);
  }
};
}  // namespace tokengate

template <template <typename, typename> class Associator, typename Handler,
          typename DefaultCandidate>
struct boost::asio::associator<Associator, tokengate::deadline_aware_handler<Handler>,
                               DefaultCandidate>
    : tokengate::wrapped_handler_associator<Associator, tokengate::deadline_aware_handler<Handler>,
                                            Handler, DefaultCandidate> {};

template <template <typename, typename> class Associator, typename Attempt, typename Handler,
          typename DefaultCandidate>
struct boost::asio::associator<Associator, tokengate::tls_direct_op<Attempt, Handler>,
                               DefaultCandidate>
    : tokengate::wrapped_handler_associator<Associator, tokengate::tls_direct_op<Attempt, Handler>,
                                            Handler, DefaultCandidate> {};

template <template <typename, typename> class Associator, typename ReadOnce, typename Handler,
          typename DefaultCandidate>
struct boost::asio::associator<Associator, tokengate::tls_direct_read_done<ReadOnce, Handler>,
                               DefaultCandidate>
    : tokengate::wrapped_handler_associator<Associator,
                                            tokengate::tls_direct_read_done<ReadOnce, Handler>,
                                            Handler, DefaultCandidate> {};
