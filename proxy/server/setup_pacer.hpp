#pragma once
// New requests take turns with the streams already open.
//
// Setting up a request (its policy, an upstream connection, the request
// sent, the response's head) costs a worker far more than relaying one
// event. When thousands of clients connect at once, the set-ups queue in
// the event loop in front of the events of the streams opened a moment
// before, and those streams stall for as long as the burst lasts
// (tests/bench/relay_delay.sh: relay delay p99 up to 500 ms in the second
// 9,000 streams open). nginx avoids this by accepting one connection per
// turn of its event loop; here the accepted connection and its request are
// read as they come, but only `per_turn` set-ups start per turn of the
// event loop: the rest wait, in order, until everything that became ready
// before them (the open streams' events among it) has run. With no burst
// there is no wait: a request starts at once.
//
// A turn's end is marked by a handler posted behind everything ready, and
// Asio polls epoll before it runs a handler posted behind its reactor: a
// marker for every request cost a quiet proxy one more `epoll_wait` per
// request. So the marker is posted only once `per_turn` starts have been
// counted (or a set-up waits): starts are counted since the last marker,
// over as many turns as they take, which bounds each turn's starts the same
// way and costs a light load one marker every `per_turn` requests.
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <cstddef>
#include <deque>

namespace tokengate {

class setup_pacer {
 public:
  // Four a turn (a turn runs up to 128 socket events, Asio's batch from
  // epoll): 9,000 streams opened at once (tests/bench/relay_delay.sh
  // 9000 500 12, and the benchmark's transit) stall the open ones least
  // with 1 to 16, all alike within the noise; 4 lets a burst into an idle
  // proxy start quickly.
  static constexpr std::size_t default_per_turn = 4;

  setup_pacer(boost::asio::any_io_executor executor, std::size_t per_turn)
      : executor_(std::move(executor)), per_turn_(per_turn == 0 ? 1 : per_turn) {}

  // True when this turn has room and nobody waits: the set-up starts now.
  bool try_start() {
    if (!waiting_.empty() || started_since_turn_end_ >= per_turn_) return false;
    start_one();
    return true;
  }
  // Completes in a later turn, after the set-ups that waited before this
  // one; the set-up is then counted as started.
  template <typename Token>
  auto wait_turn(Token&& token) {
    return boost::asio::async_initiate<Token, void()>(
        [this](auto handler) {
          waiting_.emplace_back(std::move(handler));
          schedule_turn_end();  // (already scheduled when the starts ran out)
        },
        token);
  }

  std::size_t waiting() const { return waiting_.size(); }

 private:
  // Counts a start; the one that fills the count schedules the turn's end,
  // which runs after everything ready now.
  void start_one() {
    if (++started_since_turn_end_ >= per_turn_) schedule_turn_end();
  }
  void schedule_turn_end() {
    if (turn_end_scheduled_) return;
    turn_end_scheduled_ = true;
    boost::asio::post(executor_, [this] { next_turn(); });
  }
  void next_turn() {
    turn_end_scheduled_ = false;
    started_since_turn_end_ = 0;
    while (!waiting_.empty() && started_since_turn_end_ < per_turn_) {
      auto next = std::move(waiting_.front());
      waiting_.pop_front();
      start_one();
      std::move(next)();
    }
  }

  boost::asio::any_io_executor executor_;
  std::size_t per_turn_;
  std::size_t started_since_turn_end_ = 0;
  bool turn_end_scheduled_ = false;
  std::deque<boost::asio::any_completion_handler<void()>> waiting_;
};

}  // namespace tokengate
