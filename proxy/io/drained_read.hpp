#pragma once
// A socket read that believes a short read when it is safe to, as nginx does.
//
// Asio 1.81 starts every read with an attempt (a speculative recv) unless the
// socket is known to be drained, and it only learns that from an EOF. So the
// read after each event of a stream is a recv that fails with EAGAIN before
// the read waits for epoll: one wasted syscall per event (perf stat,
// 2,000 slow streams: 238,000 recvs for 119,000 events; nginx makes 119,000).
// A read that returns less than its buffer has usually taken everything the
// kernel had, so the next one can go straight to waiting: epoll is edge
// triggered and reports anything that arrives after that read.
//
// "Usually" is the catch. When the peer's FIN or reset is already queued
// behind the bytes, recv returns the bytes and the end only on the next call,
// and the epoll wakeup that announced both has been used: a read that waits
// for another one waits for the idle timeout. So a read is believed to have
// drained the socket (short or not) only when two things say nothing is
// queued behind it:
//  - TCP_INQ: the kernel attaches to each recvmsg how much is still queued,
//    and counts a received FIN as one byte (kernel 4.18+; the socket must
//    have it on: enable_drained_reads). It does not count a reset.
//  - the events epoll last reported for the socket, which Asio keeps in the
//    socket's reactor state: a reset raises EPOLLHUP and EPOLLERR, both
//    sticky. If the reset came before that report, the report shows it; if
//    after, its wakeup is a new edge that the next read will get. (Read
//    without a lock: each worker's io_context runs on one thread, so epoll's
//    reports and these reads never overlap.)
// Otherwise the read is an ordinary one and the next read tries at once.
//
// This is Asio's own receive operation with that difference; it uses Asio's
// internals (reactor_op, the socket's reactor data), so it is tied to the
// Boost version below, and any other version takes the ordinary read.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <boost/asio/async_result.hpp>
#include <boost/asio/detail/bind_handler.hpp>
#include <boost/asio/detail/fenced_block.hpp>
#include <boost/asio/detail/handler_alloc_helpers.hpp>
#include <boost/asio/detail/handler_work.hpp>
#include <boost/asio/detail/reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#include <boost/asio/detail/socket_ops.hpp>
#include <boost/version.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "io/net.hpp"
#include "io/plain_syscalls.hpp"

namespace tokengate {

// Asks the kernel to report, with every read of this socket, how much is
// still queued (TCP_INQ). Without it no read is believed drained. False when
// the kernel does not know the option.
inline bool enable_drained_reads(tcp::socket& socket) {
  int on = 1;
  return ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_INQ, &on, sizeof on) == 0;
}

// Asks the kernel to attach to every read of this socket the time its
// newest bytes arrived (SO_TIMESTAMPNS, the real-time clock): the relay
// measures from there how long an event waited in the proxy
// (tokengate_relay_delay_seconds), its turn in the event loop included.
inline bool enable_receive_timestamps(tcp::socket& socket) {
  int on = 1;
  return ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) == 0;
}

// What drained reads of one socket tell their reader.
struct read_record {
  std::size_t believed = 0;     // reads believed to have drained the socket
  std::int64_t arrival_ns = 0;  // the last read's newest bytes' arrival, real-time ns (0: none)
  std::size_t queued =
      0;  // bytes the kernel still held after the last read (TCP_INQ; 0: none or unknown)
};

#if BOOST_VERSION == 108100 && defined(BOOST_ASIO_HAS_EPOLL) && \
    !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#define TOKENGATE_DRAINED_READ 1

namespace drained_read_detail {
namespace detail = boost::asio::detail;
using socket_type = net::basic_stream_socket<tcp, net::any_io_executor>;

// The socket's implementation is a protected member of basic_socket; a
// pointer to it, taken through a derived class, reads it without a cast.
struct socket_access : socket_type {
  static auto& implementation(socket_type& s) {
    return (s.*(&socket_access::impl_)).get_implementation();
  }
};

// The reactor keeps the events of epoll's last report for a descriptor in
// the descriptor's state, a scheduler operation (task_result_, protected).
struct last_events_access : detail::scheduler_operation {
  static const unsigned* of(detail::epoll_reactor::per_descriptor_data descriptor) {
    // (A C-style cast reaches the private base class.)
    auto* as_operation = (detail::scheduler_operation*)descriptor;
    return &(as_operation->*(&last_events_access::task_result_));
  }
};

// Reads once; says whether nothing is left queued behind what it read (see
// the top of this file). `ec`/`n` as Asio's non_blocking_recv1; false with
// no error: would block. `arrival_ns`: when the newest bytes read arrived
// (real-time nanoseconds), where the socket reports it.
inline bool read_once(int socket, net::mutable_buffer buffer, const unsigned* last_events,
                      error_code& ec, std::size_t& n, bool& drained, std::int64_t& arrival_ns,
                      std::size_t& queued_after) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(timespec))];
  msghdr message;
  ssize_t got = receive_into(socket, buffer.data(), buffer.size(), control, 0, message);
  drained = false;
  n = 0;
  if (got < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    ec = error_code(errno, boost::system::system_category());
    return true;
  }
  if (got == 0) {
    ec = net::error::eof;
    drained = true;
    return true;
  }
  ec = {};
  n = static_cast<std::size_t>(got);
  bool nothing_queued = false;
  for (auto* c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level == IPPROTO_TCP && c->cmsg_type == TCP_CM_INQ) {
      int queued;
      std::memcpy(&queued, CMSG_DATA(c), sizeof queued);
      nothing_queued = queued == 0;
      queued_after = queued > 0 ? static_cast<std::size_t>(queued) : 0;
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      timespec at;
      std::memcpy(&at, CMSG_DATA(c), sizeof at);
      arrival_ns = static_cast<std::int64_t>(at.tv_sec) * 1'000'000'000 + at.tv_nsec;
    }
  }
  // TCP_INQ counts what is left, so a read that filled its buffer to the
  // last byte is believed too (a body read to its declared length: the
  // next read, the relay's watch on the client, then waits for epoll
  // instead of failing with EAGAIN first). A reset may be queued.
  drained = nothing_queued && !(*last_events & (EPOLLERR | EPOLLHUP));
  return true;
}

// The reactor's own record of whether a read should try at once
// (`try_speculative_`: set when epoll reports the socket, cleared when a
// read drains it) and its queue of waiting reads, both private to the
// descriptor's state: reached through an explicit instantiation, which may
// name private members.
using descriptor_state = detail::epoll_reactor::descriptor_state;
using try_flags = bool (descriptor_state::*)[detail::epoll_reactor::max_ops];
using op_queues =
    detail::op_queue<detail::reactor_op> (descriptor_state::*)[detail::epoll_reactor::max_ops];
struct try_flags_tag {
  friend try_flags member_of(try_flags_tag);
};
struct op_queues_tag {
  friend op_queues member_of(op_queues_tag);
};
template <typename Tag, auto Member>
struct member_access {
  friend decltype(Member) member_of(Tag) { return Member; }
};
template struct member_access<try_flags_tag, &descriptor_state::try_speculative_>;
template struct member_access<op_queues_tag, &descriptor_state::op_queue_>;

// The reactor's record, for `socket`, of whether a read should try at
// once; null when the socket is closed.
inline bool* try_read_flag(socket_type& socket) {
  auto& impl = socket_access::implementation(socket);
  if (!socket.is_open() || !impl.reactor_data_) return nullptr;
  return &(impl.reactor_data_->*member_of(try_flags_tag{}))[detail::epoll_reactor::read_op];
}

inline void keep(read_record* record, std::int64_t arrival_ns, std::size_t queued) {
  if (!record) return;
  record->arrival_ns = arrival_ns;
  record->queued = queued;
}

// One drained read's try, as the reactor makes it (attempt_read_op below):
// done, done and drained (the reactor then skips the next read's try), or
// not done (EAGAIN: wait for the edge).
struct drained_attempt {
  int socket;
  net::mutable_buffer buffer;
  const unsigned* last_events;
  read_record* record;

  detail::reactor_op::status operator()(error_code& ec, std::size_t& n) const {
    bool drained;
    std::int64_t arrival_ns = 0;
    std::size_t queued = 0;
    if (!read_once(socket, buffer, last_events, ec, n, drained, arrival_ns, queued))
      return detail::reactor_op::not_done;
    keep(record, arrival_ns, queued);
    if (!drained) return detail::reactor_op::done;
    if (!ec && record) ++record->believed;
    return detail::reactor_op::done_and_exhausted;
  }
};

// Asio's own receive operation with another try (`Attempt`:
// status(error_code&, std::size_t&), as a reactor_op's perform): a drained
// read (drained_attempt above), or an SSL_read past the TLS handshake,
// where OpenSSL reads the socket (tls_direct.hpp). Queued on the reactor
// like Asio's own reads, so a read that must wait costs no syscall; a wait
// for readiness through Asio (async_wait) re-registers the descriptor with
// epoll_ctl every time.
template <typename Attempt, typename Handler, typename IoExecutor>
class attempt_read_op : public detail::reactor_op {
 public:
  BOOST_ASIO_DEFINE_HANDLER_PTR(attempt_read_op);

  attempt_read_op(Attempt& attempt, Handler& handler, const IoExecutor& io_ex)
      : detail::reactor_op(error_code(), &attempt_read_op::do_perform,
                           &attempt_read_op::do_complete),
        attempt_(std::move(attempt)),
        handler_(std::move(handler)),
        work_(handler_, io_ex) {}

  static status do_perform(detail::reactor_op* base) {
    auto* o = static_cast<attempt_read_op*>(base);
    return o->attempt_(o->ec_, o->bytes_transferred_);
  }

  // As Asio's reactive_socket_recv_op::do_complete.
  static void do_complete(void* owner, detail::operation* base, const error_code&, std::size_t) {
    auto* o = static_cast<attempt_read_op*>(base);
    ptr p = {std::addressof(o->handler_), o, o};
    detail::handler_work<Handler, IoExecutor> w(std::move(o->work_));
    // The handler is moved out before the operation's memory is freed: it may
    // own that memory.
    detail::binder2<Handler, error_code, std::size_t> handler(o->handler_, o->ec_,
                                                              o->bytes_transferred_);
    p.h = std::addressof(handler.handler_);
    p.reset();
    if (owner) {
      detail::fenced_block b(detail::fenced_block::half);
      w.complete(handler, handler.handler_);
    }
  }

 private:
  Attempt attempt_;
  Handler handler_;
  detail::handler_work<Handler, IoExecutor> work_;
};

}  // namespace drained_read_detail
#endif

// The reactor that serves a socket, looked up once for the reads that
// follow (the lookup takes a lock).
class read_reactor {
 public:
  explicit read_reactor(net::basic_stream_socket<tcp, net::any_io_executor>& socket) {
#ifdef TOKENGATE_DRAINED_READ
    reactor_ = &net::use_service<boost::asio::detail::reactor>(
        net::query(socket.get_executor(), net::execution::context));
#else
    (void)socket;
#endif
  }
#ifdef TOKENGATE_DRAINED_READ
  boost::asio::detail::reactor& get() const { return *reactor_; }

 private:
  boost::asio::detail::reactor* reactor_;
#endif
};

// Starts a read of `socket` (served by `reactor`) into `buffer`, like its
// async_read_some, that leaves the next read to wait for epoll when this
// one drained the socket (above). `record` (may be null) hears of each
// read; it must outlive the read. Falls back to the ordinary read where the
// drained one cannot run.
template <typename Handler>
void start_drained_read(net::basic_stream_socket<tcp, net::any_io_executor>& socket,
                        const read_reactor& reactor, net::mutable_buffer buffer, Handler&& handler,
                        read_record* record) {
  if (record) {  // (set by this read, or by none)
    record->arrival_ns = 0;
    record->queued = 0;
  }
#ifdef TOKENGATE_DRAINED_READ
  namespace detail = boost::asio::detail;
  using attempt = drained_read_detail::drained_attempt;
  using op =
      drained_read_detail::attempt_read_op<attempt, std::decay_t<Handler>, net::any_io_executor>;
  auto& impl = drained_read_detail::socket_access::implementation(socket);
  // Asio made the socket non-blocking at its first asynchronous operation;
  // before that (a socket never read yet), or for an empty buffer, the
  // ordinary read.
  if ((impl.state_ & detail::socket_ops::non_blocking) && buffer.size() > 0 && socket.is_open()) {
    attempt read{impl.socket_, buffer,
                 drained_read_detail::last_events_access::of(impl.reactor_data_), record};
    typename op::ptr p = {std::addressof(handler), op::ptr::allocate(handler), nullptr};
    p.p = new (p.v) op(read, handler, socket.get_executor());
    reactor.get().start_op(detail::reactor::read_op, impl.socket_, impl.reactor_data_, p.p, false,
                           true);
    p.v = p.p = nullptr;
    return;
  }
#else
  (void)reactor;
#endif
  socket.async_read_some(buffer, std::forward<Handler>(handler));
}

// Starts a read of `socket` whose every try is `attempt` (attempt_read_op
// above): at once where the reactor would try a read at once, then at each
// report of epoll's until it says done. Where that cannot run (another
// Boost), false: the caller waits its own way.
template <typename Attempt, typename Handler>
bool start_attempted_read(net::basic_stream_socket<tcp, net::any_io_executor>& socket,
                          const read_reactor& reactor, Attempt&& attempt, Handler&& handler) {
#ifdef TOKENGATE_DRAINED_READ
  namespace detail = boost::asio::detail;
  using op = drained_read_detail::attempt_read_op<std::decay_t<Attempt>, std::decay_t<Handler>,
                                                  net::any_io_executor>;
  auto& impl = drained_read_detail::socket_access::implementation(socket);
  if (!(impl.state_ & detail::socket_ops::non_blocking) || !socket.is_open()) return false;
  typename op::ptr p = {std::addressof(handler), op::ptr::allocate(handler), nullptr};
  p.p = new (p.v) op(attempt, handler, socket.get_executor());
  reactor.get().start_op(detail::reactor::read_op, impl.socket_, impl.reactor_data_, p.p, false,
                         true);
  p.v = p.p = nullptr;
  return true;
#else
  (void)socket, (void)reactor, (void)attempt, (void)handler;
  return false;
#endif
}

// Reads `socket` now, without waiting, where a read started through Asio
// would begin with an attempt anyway (epoll has reported the socket since a
// read last drained it, and no read waits): the same recvmsg, but bytes
// found at once are taken here instead of through a completion Asio posts
// (an initiating function may not call its handler), which costs the loop a
// zero-timeout epoll_wait before it runs the posted handler, and the
// coroutine a suspension. A strace of one kept-alive connection showed two
// such a request: the upstream's last bytes, and the client's next request.
// True when it read: bytes (`n`), the end or an error (`ec`). False when it
// did not (would block, or Asio would not have tried); the reactor then
// knows as much as after its own failed attempt, and the ordinary read
// that follows waits for epoll without trying again. Plain sockets only.
inline bool read_now(net::basic_stream_socket<tcp, net::any_io_executor>& socket,
                     net::mutable_buffer buffer, read_record* record, error_code& ec,
                     std::size_t& n) {
#ifdef TOKENGATE_DRAINED_READ
  namespace detail = boost::asio::detail;
  using namespace drained_read_detail;
  auto& impl = socket_access::implementation(socket);
  bool* try_at_once = try_read_flag(socket);
  if (!try_at_once || !*try_at_once || !(impl.state_ & detail::socket_ops::non_blocking) ||
      buffer.size() == 0)
    return false;
  auto* state = impl.reactor_data_;
  auto& waiting = (state->*member_of(op_queues_tag{}));
  if (!waiting[detail::epoll_reactor::read_op].empty() ||
      !waiting[detail::epoll_reactor::except_op].empty())
    return false;
  bool drained;
  std::int64_t arrival_ns = 0;
  std::size_t queued = 0;
  keep(record, 0, 0);
  if (!read_once(impl.socket_, buffer, last_events_access::of(state), ec, n, drained, arrival_ns,
                 queued)) {
    // As after Asio's own attempt: wait for epoll's next report. Nothing
    // can come in between: epoll's reports are handled on this thread.
    *try_at_once = false;
    return false;
  }
  keep(record, arrival_ns, queued);
  if (drained) {
    *try_at_once = false;  // as for a read that returned done_and_exhausted
    if (!ec && record) ++record->believed;
  }
  return true;
#else
  (void)socket, (void)buffer, (void)record, (void)ec, (void)n;
  return false;
#endif
}

// Tells the reactor that `socket` has nothing to read until epoll next
// reports it, where that is so: the peer has had no reason to send yet (a
// client just accepted, an upstream just sent its request on a new
// connection). Asio's next read would otherwise begin with a recv that
// fails with EAGAIN, as it does on every newly registered socket (nginx
// waits for the event instead). It is so when epoll's last report for the
// socket showed nothing to read: its reports carry everything readable at
// the time, and anything that comes later is a new edge, which sets the
// reactor's record again. (A descriptor state is reused from socket to
// socket: a report not yet taken for this one is still to come.)
inline void wait_for_next_report(net::basic_stream_socket<tcp, net::any_io_executor>& socket) {
#ifdef TOKENGATE_DRAINED_READ
  using namespace drained_read_detail;
  bool* try_at_once = try_read_flag(socket);
  if (!try_at_once) return;
  auto* state = socket_access::implementation(socket).reactor_data_;
  if (*last_events_access::of(state) & (EPOLLIN | EPOLLPRI | EPOLLERR | EPOLLHUP | EPOLLRDHUP))
    return;
  *try_at_once = false;
#else
  (void)socket;
#endif
}

// Records that a read of `socket` made outside Asio (TLS past its
// handshake, tls_direct.hpp) has just failed with EAGAIN: as after Asio's own
// failed attempt, nothing is to be read until epoll's next report, which
// sets the record again (quiet_since_drained below tells).
inline void note_would_block(net::basic_stream_socket<tcp, net::any_io_executor>& socket) {
#ifdef TOKENGATE_DRAINED_READ
  if (bool* try_at_once = drained_read_detail::try_read_flag(socket)) *try_at_once = false;
#else
  (void)socket;
#endif
}

// The opposite: the next read of `socket` is to try at once, whatever the
// reactor's record says (bytes read from it are held elsewhere: by OpenSSL,
// tls_direct.hpp).
inline void try_next_read_at_once(net::basic_stream_socket<tcp, net::any_io_executor>& socket) {
#ifdef TOKENGATE_DRAINED_READ
  if (bool* try_at_once = drained_read_detail::try_read_flag(socket)) *try_at_once = true;
#else
  (void)socket;
#endif
}

// Whether no report of epoll's that the socket has something to read (a
// byte, the end, an error) has been taken since a read drained it: the
// reactor's record of whether to try a read at once, which such a report
// sets and a draining read clears. Then the peer had sent nothing, nor
// closed, as far as the loop has taken epoll's reports; one still queued
// behind the caller, or not yet polled, is not seen.
inline bool quiet_since_drained(net::basic_stream_socket<tcp, net::any_io_executor>& socket) {
#ifdef TOKENGATE_DRAINED_READ
  bool* try_at_once = drained_read_detail::try_read_flag(socket);
  return try_at_once && !*try_at_once;
#else
  (void)socket;
  return false;
#endif
}

// Reads from one socket, like its async_read_some, keeping what the reads
// tell (read_record). Made once per response relayed; the socket must
// outlive it. No per-operation cancellation: closing or cancelling the
// socket stops a read.
class drained_reader {
 public:
  using socket_type = net::basic_stream_socket<tcp, net::any_io_executor>;
  explicit drained_reader(socket_type& socket) : socket_(socket), reactor_(socket) {}
  // With the reactor its connection already looked up (any_stream::reactor()).
  drained_reader(socket_type& socket, const read_reactor& reactor)
      : socket_(socket), reactor_(reactor) {}

  template <typename Token>
  auto async_read_some(net::mutable_buffer buffer, Token&& token) {
    return net::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, net::mutable_buffer b) {
          start_drained_read(socket_, reactor_, b, std::move(handler), &record_);
        },
        token, buffer);
  }

  // read_now (above) for this socket.
  bool read_now(net::mutable_buffer buffer, error_code& ec, std::size_t& n) {
    return tokengate::read_now(socket_, buffer, &record_, ec, n);
  }

  // How many reads were believed to have drained the socket (so that the
  // next read skipped its attempt).
  std::size_t believed() const { return record_.believed; }
  // When the newest bytes of the last read arrived in the kernel, real-time
  // nanoseconds; 0 when the socket does not report it
  // (enable_receive_timestamps) or the read was not this one's own.
  std::int64_t last_arrival_ns() const { return record_.arrival_ns; }
  // How many bytes the kernel still held for this socket after the last
  // read (the upstream is ahead of its reader); 0 when none, or when the
  // read was not this one's own.
  std::size_t last_queued() const { return record_.queued; }
  // How long ago that was, by the real-time clock; none when the read took
  // no stamp or the clock has stepped back past it.
  std::optional<std::chrono::nanoseconds> since_last_arrival() const {
    if (record_.arrival_ns == 0) return std::nullopt;
    auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    if (now_ns < record_.arrival_ns) return std::nullopt;
    return std::chrono::nanoseconds(now_ns - record_.arrival_ns);
  }

 private:
  socket_type& socket_;
  read_reactor reactor_;
  read_record record_;
};

}  // namespace tokengate
