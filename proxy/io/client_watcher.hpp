#pragma once
// Reads from the client while its response is produced. A read that fails
// means the client is gone: the exchange closes the upstream at once, so
// that the engine stops generating and frees its KV cache (on every path:
// prefill, mid-stream, non-streaming). Bytes that arrive are kept in the
// session's buffer for the next request.
//
// One per connection, owned by the session, so that the read pending when
// a response ends need not be cancelled: it goes on as the wait for the
// next request (or the client's close). Cancelling it cost a posted
// completion, and Asio polls epoll (a zero-timeout epoll_wait) before it
// runs one; the session then started a read of its own.
//
// A chain of reads, each started by the last one's completion handler,
// rather than a coroutine: co_spawn cost a coroutine frame for the watcher
// and one for its entry point, two work guards and an awaitable operation
// per read, every request (callgrind).
#include <algorithm>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <utility>

#include "io/any_stream.hpp"
#include "io/net.hpp"

namespace tokengate {

// What an exchange does when the client turns out to be gone.
class client_gone_hook {
 public:
  virtual void client_gone() = 0;

 protected:
  ~client_gone_hook() = default;
};

class client_watcher {
 public:
  // Bytes of a pipelined next request accepted while a response is relayed.
  static constexpr std::size_t max_pipelined_bytes = 64 * 1024;

  // Both must outlive every read: the session keeps them, and cancels and
  // waits for the last read (async_wait_read) before they go.
  client_watcher(any_stream& client, beast::flat_buffer& buffer)
      : client_(client), buffer_(buffer) {}
  client_watcher(const client_watcher&) = delete;
  client_watcher& operator=(const client_watcher&) = delete;

  // An exchange begins: reads start (unless one is still pending, which
  // the session waits for first) and a failed one calls `hook`.
  void watch(client_gone_hook& hook) {
    hook_ = &hook;
    if (reading_) return;  // (the session waits for it before a request is read: not expected)
    // The request has been taken out of the buffer: its memory goes back,
    // and the watcher reads into a small one (a stream can last minutes,
    // and 10,000 streams at 4 KiB each are 40 MB). A pipelined request
    // grows it.
    if (buffer_.size() == 0) buffer_.shrink_to_fit();
    read_next();
  }

  // The client's last request took `bytes` (head and body): the watcher
  // reads with room for one of that size, so that the next request, if
  // like it, comes in one read. A read of 512 bytes split every request of
  // the OpenAI SDK's (its head alone is 900 bytes) in two: one `recvmsg`
  // more a request (`SDK_HEADERS=1 per_event.sh`: 3.25 a 2-token
  // request's event against 2.75). Capped, since a stream keeps this
  // buffer for its life; a longer body is read into place anyway.
  void expect_requests_of(std::size_t bytes) {
    expected_ = std::clamp<std::size_t>(bytes, 512, 2048);
  }

  // The exchange is over: the hook is forgotten, and a read still pending
  // is left to complete as the wait for the next request. Where bytes of
  // that request have come already, the read is stopped instead: the
  // session parses them at once (and the buffer may not move under a read).
  void unwatch() {
    hook_ = nullptr;
    if (reading_ && buffer_.size() > 0) {
      stopped_for_bytes_ = true;
      cancel();
    }
  }

  // Whether a read is pending: nothing may read the client, or touch the
  // buffer, until async_wait_read has completed.
  bool reading() const { return reading_; }

  // Completes, with the pending read's error, when it is done (at once, with
  // none, when no read is pending). The waiter is resumed straight from the
  // read's completion handler.
  template <typename Token>
  auto async_wait_read(Token&& token) {
    return net::async_initiate<Token, void(error_code)>(
        [this](auto handler) {
          if (!reading_) {
            return net::post(client_.get_executor(), [handler = std::move(handler)]() mutable {
              std::move(handler)(error_code{});
            });
          }
          // (Constructed and swapped in: Boost 1.81's move assignment of
          // any_completion_handler copies its source as a new handler to
          // wrap, which wraps itself again, without end.)
          net::any_completion_handler<void(error_code)>(std::move(handler)).swap(waiter_);
        },
        token);
  }

  // Stops a pending read (the session is ending).
  void cancel() {
    error_code ignored;
    client_.socket().cancel(ignored);
  }

 private:
  void read_next() {
    if (buffer_.size() >= max_pipelined_bytes) return;  // (the rest waits in the kernel)
    auto room = std::max<std::size_t>(expected_, buffer_.capacity() - buffer_.size());
    net::mutable_buffer into;
    try {
      into = buffer_.prepare(room);
    } catch (const std::exception&) {  // (no memory: the exchange goes on unwatched)
      return;
    }
    reading_ = true;
    client_.async_read_some(into, [this](error_code ec, std::size_t n) {
      // Keep what arrived before anything else: it may be the next request,
      // sent the moment the last byte of this response reached the client.
      buffer_.commit(n);
      reading_ = false;
      // (A read that completed before unwatch's cancel reached it leaves
      // nothing to excuse: the flag goes either way.)
      if (std::exchange(stopped_for_bytes_, false) && ec == net::error::operation_aborted) ec = {};
      if (ec && hook_) hook_->client_gone();
      if (!ec && hook_) return read_next();
      if (!waiter_) return;
      // The waiter (the session) may go on to the next request, start a
      // read here and even end the connection: nothing runs after it.
      auto waiter = std::move(waiter_);
      std::move(waiter)(ec);
    });
  }

  any_stream& client_;
  beast::flat_buffer& buffer_;
  client_gone_hook* hook_ = nullptr;
  net::any_completion_handler<void(error_code)> waiter_;
  bool reading_ = false;
  bool stopped_for_bytes_ = false;  // cancelled by unwatch: not a failure
  std::size_t expected_ = 512;      // room for the next request (expect_requests_of)
};

}  // namespace tokengate
