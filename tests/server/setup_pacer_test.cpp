// New requests' set-ups, paced: at most `per_turn` start in one turn of the
// event loop, the rest wait in order behind what was already ready.
#include "server/setup_pacer.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <utility>
#include <vector>

namespace tokengate {
namespace {

namespace net = boost::asio;

// One request's set-up: waits for its turn if it must, then notes in which
// turn of the loop it started.
net::awaitable<void> set_up(setup_pacer& pacer, int id, const int& turn,
                            std::vector<std::pair<int, int>>& started) {
  if (!pacer.try_start()) co_await pacer.wait_turn(net::use_awaitable);
  started.emplace_back(id, turn);
}

TEST(SetupPacer, StartsAtOnceWhileTheTurnHasRoom) {
  net::io_context io;
  setup_pacer pacer(io.get_executor(), 2);
  EXPECT_TRUE(pacer.try_start());
  EXPECT_TRUE(pacer.try_start());
  EXPECT_FALSE(pacer.try_start()) << "two a turn";
  io.run();  // the turn ends
  EXPECT_TRUE(pacer.try_start()) << "a new turn has room again";
}

TEST(SetupPacer, ABurstStartsTwoATurnInOrderBetweenOtherWork) {
  net::io_context io;
  setup_pacer pacer(io.get_executor(), 2);
  // Other work ready in every turn (an open stream's events): a handler
  // that counts turns by posting itself again.
  int turn = 0;
  std::function<void()> tick = [&] {
    if (++turn < 20) net::post(io, tick);
  };
  net::post(io, tick);
  std::vector<std::pair<int, int>> started;
  for (int id = 0; id < 7; ++id) net::co_spawn(io, set_up(pacer, id, turn, started), net::detached);
  io.run();
  const std::vector<std::pair<int, int>> expected{{0, 1}, {1, 1}, {2, 2}, {3, 2},
                                                  {4, 3}, {5, 3}, {6, 4}};
  EXPECT_EQ(started, expected);
  EXPECT_EQ(pacer.waiting(), 0u);
}

TEST(SetupPacer, AQuietProxyPostsNoTurnEndUntilTheStartsAddUp) {
  // A turn's end is a posted handler, and each one costs an epoll poll:
  // starts below the limit schedule none, the one that reaches it does.
  net::io_context io;
  setup_pacer pacer(io.get_executor(), 3);
  auto handlers_of_a_turn = [&] {
    io.restart();
    return io.poll();
  };
  EXPECT_TRUE(pacer.try_start());
  EXPECT_EQ(handlers_of_a_turn(), 0u) << "one start in a quiet turn: no turn end posted";
  EXPECT_TRUE(pacer.try_start());
  EXPECT_EQ(handlers_of_a_turn(), 0u);
  EXPECT_TRUE(pacer.try_start()) << "the third start since the last turn end";
  EXPECT_FALSE(pacer.try_start()) << "counted over turns, so no turn starts more than three";
  EXPECT_EQ(handlers_of_a_turn(), 1u) << "the turn end, posted by the start that reached the limit";
  EXPECT_TRUE(pacer.try_start()) << "counting starts again";
}

}  // namespace
}  // namespace tokengate
