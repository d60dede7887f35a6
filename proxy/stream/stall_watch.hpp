#pragma once
// One timer per relayed stream for both of its timeouts: the upstream going
// quiet (no byte within its idle timeout, or the request's total deadline)
// and the client not taking a write (client_write_timeout).
//
// Beast's stream timeouts arm and cancel a timer around every read and every
// write: a timer-heap insertion and removal per operation, and often a
// timerfd_settime, several times per relayed event. Here a read or a write
// only stores a time point; the timer wakes about once per write timeout and
// acts only when something is overdue, by calling `on_stall`, which closes
// the stalled side so that its pending operation fails.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>

namespace tokengate::stream {

class stall_watch {
 public:
  using clock = std::chrono::steady_clock;
  enum class side { none, upstream, client };

  stall_watch(const boost::asio::any_io_executor& executor, clock::duration write_timeout,
              std::function<void(side)> on_stall)
      : state_(std::make_shared<state>(executor, write_timeout, std::move(on_stall))) {
    state_->arm_after(clock::now());
  }
  // Stops the timer: `on_stall` is never called after this object is gone.
  ~stall_watch() {
    state_->stopped = true;
    state_->timer.cancel();
  }
  stall_watch(const stall_watch&) = delete;
  stall_watch& operator=(const stall_watch&) = delete;

  // A read from the upstream is about to start and must bring a byte by `by`.
  // (Deadlines normally only move later; an earlier one re-arms the timer.)
  void upstream_read(clock::time_point by) {
    state_->read_by = by;
    if (by < state_->armed_at) state_->arm_at(by);
  }
  void upstream_read_done() { state_->read_by = clock::time_point::max(); }
  void client_write(clock::time_point now) { state_->write_by = now + state_->write_timeout; }
  void client_write_done() { state_->write_by = clock::time_point::max(); }

  // Which side was found stalled (and closed), if any.
  side stalled() const { return state_->stalled; }

 private:
  // Shared with the pending timer handler, which may run after the relay
  // has moved on; `stopped` tells it the streams are no longer ours to close.
  struct state : std::enable_shared_from_this<state> {
    state(const boost::asio::any_io_executor& executor, clock::duration write_timeout,
          std::function<void(side)> on_stall)
        : timer(executor), write_timeout(write_timeout), on_stall(std::move(on_stall)) {}

    boost::asio::steady_timer timer;
    clock::duration write_timeout;
    std::function<void(side)> on_stall;
    clock::time_point read_by = clock::time_point::max();
    clock::time_point write_by = clock::time_point::max();
    clock::time_point armed_at = clock::time_point::max();
    side stalled = side::none;
    bool stopped = false;

    // Wakes at the earliest deadline now known, and at the latest one write
    // timeout from now: a write that starts later is then still seen in time.
    void arm_after(clock::time_point now) {
      arm_at(std::min(read_by, write_by == clock::time_point::max() ? now + write_timeout : write_by));
    }
    void arm_at(clock::time_point at) {
      armed_at = at;
      timer.expires_at(at);  // (cancels the previous wait, whose handler then returns)
      timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (ec != boost::asio::error::operation_aborted) self->check();
      });
    }

    void check() {
      if (stopped) return;
      auto now = clock::now();
      if (write_by <= now) stalled = side::client;
      else if (read_by <= now) stalled = side::upstream;
      if (stalled == side::none) return arm_after(now);
      on_stall(stalled);
    }
  };
  std::shared_ptr<state> state_;
};

}  // namespace tokengate::stream
