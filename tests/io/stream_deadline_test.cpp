// A connection's deadline: one timer, moved by storing a time point; the
// connection is closed once, when the deadline that holds at that moment
// passes, and never after it is released.
#include "io/stream_deadline.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

namespace tokengate {
namespace {

using namespace std::chrono_literals;
using deadline_clock = stream_deadline::clock;

struct deadline_fixture {
  boost::asio::io_context io;
  int closes = 0;
  deadline_clock::time_point closed_at{};
  stream_deadline deadline{io.get_executor(), [this] {
                             ++closes;
                             closed_at = deadline_clock::now();
                           }};
  void run_for(deadline_clock::duration d) {
    io.restart();
    io.run_for(d);
  }
};

TEST(StreamDeadline, ClosesOnceWhenItPasses) {
  deadline_fixture f;
  auto start = deadline_clock::now();
  f.deadline.expires_at(start + 50ms);
  f.run_for(300ms);
  EXPECT_EQ(f.closes, 1);
  EXPECT_GE(f.closed_at - start, 50ms);
  EXPECT_TRUE(f.deadline.expired());
}

TEST(StreamDeadline, ALaterDeadlineIsWaitedFor) {
  // The timer armed for the first deadline wakes, finds a later one and
  // sleeps again: no close at 50 ms, one at 250.
  deadline_fixture f;
  auto start = deadline_clock::now();
  f.deadline.expires_at(start + 50ms);
  f.deadline.expires_at(start + 250ms);
  f.run_for(150ms);
  EXPECT_EQ(f.closes, 0);
  EXPECT_FALSE(f.deadline.expired());
  f.run_for(400ms);
  EXPECT_EQ(f.closes, 1);
  EXPECT_GE(f.closed_at - start, 250ms);
}

TEST(StreamDeadline, AnEarlierDeadlineRearmsTheTimer) {
  deadline_fixture f;
  auto start = deadline_clock::now();
  f.deadline.expires_at(start + 10s);
  f.deadline.expires_at(start + 50ms);
  f.run_for(500ms);
  EXPECT_EQ(f.closes, 1);
  EXPECT_LT(f.closed_at - start, 400ms);
}

TEST(StreamDeadline, NoDeadlineNoClose) {
  deadline_fixture f;
  f.deadline.expires_at(deadline_clock::now() + 50ms);
  f.deadline.expires_never();
  f.run_for(200ms);
  EXPECT_EQ(f.closes, 0);
  EXPECT_FALSE(f.deadline.expired());
}

TEST(StreamDeadline, ReleasedItClosesNothing) {
  // What a stream's destruction does: the pending wait may still complete,
  // but must not touch a connection that is gone.
  deadline_fixture f;
  f.deadline.expires_at(deadline_clock::now() + 30ms);
  f.deadline.release();
  f.run_for(200ms);
  EXPECT_EQ(f.closes, 0);
}

TEST(StreamDeadline, AMovedDeadlineKeepsItsTimeAndCloses) {
  deadline_fixture f;
  auto start = deadline_clock::now();
  f.deadline.expires_at(start + 50ms);
  stream_deadline moved(std::move(f.deadline));
  f.run_for(300ms);
  EXPECT_EQ(f.closes, 1);
  EXPECT_TRUE(moved.expired());
}

}  // namespace
}  // namespace tokengate
