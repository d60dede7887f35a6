#pragma once
// A socket read that believes a short read, as nginx does.
//
// Asio 1.81 starts every read with an attempt (a speculative recv) unless the
// socket is known to be drained, and it only learns that from an EOF. So the
// read after each event of a stream is a recv that fails with EAGAIN before
// the read waits for epoll: one wasted syscall per event (perf stat,
// 2,000 slow streams: 238,000 recvs for 119,000 events; nginx makes 119,000).
// A read that returns less than the buffer holds has taken everything the
// kernel had, so the next one can go straight to waiting: epoll is edge
// triggered and reports any byte that arrives after that recv.
//
// This is Asio's own receive operation with that one difference; it uses
// Asio's internals (reactor_op, the socket's reactor data), so it is tied to
// the Boost version below, and any other version takes the ordinary read.
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/detail/bind_handler.hpp>
#include <boost/asio/detail/fenced_block.hpp>
#include <boost/asio/detail/handler_alloc_helpers.hpp>
#include <boost/asio/detail/handler_work.hpp>
#include <boost/asio/detail/reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#include <boost/asio/detail/socket_ops.hpp>
#include <boost/version.hpp>

#include "net.hpp"

namespace tokengate {

#if BOOST_VERSION == 108100 && defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#define TOKENGATE_DRAINED_READ 1

namespace drained_read_detail {
namespace detail = boost::asio::detail;
using socket_type = net::basic_stream_socket<tcp, net::any_io_executor>;

// The socket's implementation is a protected member of basic_socket; a
// pointer to it, taken through a derived class, reads it without a cast.
struct socket_access : socket_type {
  static auto& implementation(socket_type& s) { return (s.*(&socket_access::impl_)).get_implementation(); }
};

template <typename Handler, typename IoExecutor>
class read_op : public detail::reactor_op {
 public:
  BOOST_ASIO_DEFINE_HANDLER_PTR(read_op);

  read_op(int socket, net::mutable_buffer buffer, Handler& handler, const IoExecutor& io_ex)
      : detail::reactor_op(error_code(), &read_op::do_perform, &read_op::do_complete),
        socket_(socket),
        buffer_(buffer),
        handler_(std::move(handler)),
        work_(handler_, io_ex) {}

  static status do_perform(detail::reactor_op* base) {
    auto* o = static_cast<read_op*>(base);
    if (!detail::socket_ops::non_blocking_recv1(o->socket_, o->buffer_.data(), o->buffer_.size(), 0, true, o->ec_,
                                                o->bytes_transferred_))
      return not_done;  // EAGAIN: wait for the edge
    // Short (or EOF, or an error): nothing more to read until epoll says so.
    if (o->ec_ || o->bytes_transferred_ < o->buffer_.size()) return done_and_exhausted;
    return done;
  }

  // As Asio's reactive_socket_recv_op::do_complete.
  static void do_complete(void* owner, detail::operation* base, const error_code&, std::size_t) {
    auto* o = static_cast<read_op*>(base);
    ptr p = {std::addressof(o->handler_), o, o};
    detail::handler_work<Handler, IoExecutor> w(std::move(o->work_));
    // The handler is moved out before the operation's memory is freed: it may
    // own that memory.
    detail::binder2<Handler, error_code, std::size_t> handler(o->handler_, o->ec_, o->bytes_transferred_);
    p.h = std::addressof(handler.handler_);
    p.reset();
    if (owner) {
      detail::fenced_block b(detail::fenced_block::half);
      w.complete(handler, handler.handler_);
    }
  }

 private:
  int socket_;
  net::mutable_buffer buffer_;
  Handler handler_;
  detail::handler_work<Handler, IoExecutor> work_;
};

}  // namespace drained_read_detail
#endif

// Reads from one socket, like its async_read_some. Made once per response
// relayed (it looks up the socket's reactor, which takes a lock); the socket
// must outlive it. No per-operation cancellation: closing or cancelling the
// socket stops a read.
class drained_reader {
 public:
  using socket_type = net::basic_stream_socket<tcp, net::any_io_executor>;
  explicit drained_reader(socket_type& socket) : socket_(socket) {
#ifdef TOKENGATE_DRAINED_READ
    reactor_ = &net::use_service<boost::asio::detail::reactor>(
        net::query(socket.get_executor(), net::execution::context));
#endif
  }

  template <typename Token>
  auto async_read_some(net::mutable_buffer buffer, Token&& token) {
    return net::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, net::mutable_buffer b) {
#ifdef TOKENGATE_DRAINED_READ
          namespace detail = boost::asio::detail;
          using op = drained_read_detail::read_op<decltype(handler), net::any_io_executor>;
          auto& impl = drained_read_detail::socket_access::implementation(socket_);
          // Asio made the socket non-blocking at its first asynchronous
          // operation; before that (never, on the relay's path), or for an
          // empty buffer, the ordinary read.
          if ((impl.state_ & detail::socket_ops::non_blocking) && b.size() > 0 && socket_.is_open()) {
            typename op::ptr p = {std::addressof(handler), op::ptr::allocate(handler), nullptr};
            p.p = new (p.v) op(impl.socket_, b, handler, socket_.get_executor());
            reactor_->start_op(detail::reactor::read_op, impl.socket_, impl.reactor_data_, p.p, false, true);
            p.v = p.p = nullptr;
            return;
          }
#endif
          socket_.async_read_some(b, std::move(handler));
        },
        token, buffer);
  }

 private:
  socket_type& socket_;
#ifdef TOKENGATE_DRAINED_READ
  boost::asio::detail::reactor* reactor_ = nullptr;
#endif
};

}  // namespace tokengate
