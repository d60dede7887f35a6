#pragma once
// The deadline of one connection: one timer for the connection's whole life
// instead of one per operation.
//
// Beast's tcp_stream arms a timer around every read and write it is given a
// timeout for, and wraps every operation, timed or not, in one of its own
// (a shared state, a work guard, two executor copies); reading a request and
// the upstream's head that way cost about 4,500 instructions a request, 4 %
// of them (tests/bench/instructions.sh). Here
// setting a deadline stores a time point; the timer is armed only when the
// new deadline is earlier than the one it waits for (deadlines mostly move
// later: each request pushes them on), and a timer that wakes before the
// current deadline sleeps again until it. When a deadline passes, the
// connection is closed, as Beast does: what is pending fails, and the stream
// reports every failure from then on as beast::error::timeout.
//
// The deadline covers every operation on the connection until it is moved
// or cleared (expires_never), not only the next one: callers clear it when a
// phase with a time limit ends (see any_stream).
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>

namespace tokengate {

class stream_deadline {
 public:
  using clock = std::chrono::steady_clock;

  // `on_expiry` closes the connection; it is called at most once, and never
  // after release().
  stream_deadline(const boost::asio::any_io_executor& executor, std::function<void()> on_expiry)
      : state_(std::make_shared<state>(executor, std::move(on_expiry))) {}
  ~stream_deadline() { release(); }
  stream_deadline(stream_deadline&&) = default;  // (the moved-from one holds nothing)
  stream_deadline& operator=(stream_deadline&& other) {
    release();
    state_ = std::move(other.state_);
    return *this;
  }

  void expires_at(clock::time_point at) {
    state_->deadline = at;
    if (at < state_->armed_at) state_->arm(at);
  }
  void expires_never() { state_->deadline = clock::time_point::max(); }
  // The deadline passed and the connection was closed for it.
  bool expired() const { return state_->expired; }
  // The same, for a completion handler, which may run after the stream is
  // gone (an operation aborted by the socket's destruction).
  std::shared_ptr<const bool> expired_flag() const { return {state_, &state_->expired}; }
  // The connection changed hands (on_expiry must now close another object)
  // or is gone (nullptr: nothing is closed any more).
  void rebind(std::function<void()> on_expiry) { state_->on_expiry = std::move(on_expiry); }
  void release() {
    if (!state_) return;
    state_->on_expiry = nullptr;
    state_->timer.cancel();
  }

 private:
  // Shared with the pending wait, whose handler may run after the stream
  // is gone; an empty on_expiry tells it so.
  struct state : std::enable_shared_from_this<state> {
    state(const boost::asio::any_io_executor& executor, std::function<void()> on_expiry)
        : timer(executor), on_expiry(std::move(on_expiry)) {}

    boost::asio::steady_timer timer;
    std::function<void()> on_expiry;
    clock::time_point deadline = clock::time_point::max();
    clock::time_point armed_at = clock::time_point::max();  // max: no wait pending
    bool expired = false;

    void arm(clock::time_point at) {
      armed_at = at;
      timer.expires_at(at);  // (cancels the wait before: its handler returns without acting)
      timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (ec != boost::asio::error::operation_aborted) self->wake();
      });
    }
    void wake() {
      armed_at = clock::time_point::max();
      if (!on_expiry || deadline == clock::time_point::max()) return;
      if (clock::now() < deadline) return arm(deadline);  // moved on since this wait began
      expired = true;
      auto close = std::move(on_expiry);
      close();
    }
  };
  std::shared_ptr<state> state_;
};

}  // namespace tokengate
