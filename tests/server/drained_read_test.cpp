// The relay's upstream read, which skips the recv attempt after a short read
// and relies on epoll's edge for what comes next: no byte may be missed in
// any order of "bytes arrive" and "a read starts".
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "server/drained_read.hpp"

namespace tokengate {
namespace {

using namespace std::chrono_literals;

struct socket_pair {
  net::io_context io;
  net::basic_stream_socket<tcp, net::any_io_executor> ours{io.get_executor()};
  tcp::socket peer{io};

  socket_pair() {
    tcp::acceptor acceptor(io, tcp::endpoint(net::ip::address_v4::loopback(), 0));
    peer.connect(acceptor.local_endpoint());
    acceptor.accept(ours);
    // Any asynchronous operation makes Asio switch the socket to
    // non-blocking, after which every read takes the drained path.
    ours.async_wait(tcp::socket::wait_write, [](error_code) {});
    io.run();
  }

  // Starts a read of up to `size` bytes and runs the context until it
  // completes or `timeout` passes.
  std::optional<std::pair<error_code, std::string>> read(drained_reader& reader, std::size_t size,
                                                         std::chrono::milliseconds timeout = 2s) {
    std::string buffer(size, '\0');
    std::optional<std::pair<error_code, std::string>> result;
    reader.async_read_some(net::buffer(buffer), [&](error_code ec, std::size_t n) {
      result.emplace(ec, buffer.substr(0, n));
    });
    io.restart();
    io.run_for(timeout);
    return result;
  }

  // Runs the context (so that epoll is polled) with no read pending.
  void idle(std::chrono::milliseconds how_long) {
    net::steady_timer t(io, how_long);
    t.async_wait([](error_code) {});
    io.restart();
    io.run();
  }
};

TEST(DrainedRead, IsInEffectWithThisBoost) {
#ifndef TOKENGATE_DRAINED_READ
  FAIL() << "Boost is not 1.81 here: the relay falls back to Asio's read, one EAGAIN recv per event; "
            "port drained_read_detail::read_op to this version";
#endif
}

TEST(DrainedRead, BytesThatArriveAfterAShortReadWakeThePendingRead) {
  socket_pair s;
  drained_reader reader(s.ours);
  net::write(s.peer, net::buffer(std::string("abc")));
  auto first = s.read(reader, 4096);  // short: the socket is marked drained
  ASSERT_TRUE(first);
  EXPECT_EQ(first->second, "abc");

  std::string second;
  reader.async_read_some(net::buffer(second.assign(64, '\0')), [&](error_code ec, std::size_t n) {
    EXPECT_FALSE(ec);
    second.resize(n);
  });
  net::steady_timer later(s.io, 30ms);
  later.async_wait([&](error_code) { net::write(s.peer, net::buffer(std::string("def"))); });
  s.io.restart();
  s.io.run_for(2s);
  EXPECT_EQ(second, "def");
}

TEST(DrainedRead, BytesThatArriveWhileNoReadIsPendingAreReadAtOnce) {
  socket_pair s;
  drained_reader reader(s.ours);
  net::write(s.peer, net::buffer(std::string("abc")));
  ASSERT_TRUE(s.read(reader, 4096));
  // The edge for these bytes is seen by epoll while nothing waits on the
  // socket: the reactor remembers it, and the next read tries at once.
  net::write(s.peer, net::buffer(std::string("def")));
  s.idle(30ms);
  auto second = s.read(reader, 4096, 500ms);
  ASSERT_TRUE(second) << "the bytes were there but the read waited for an edge that had passed";
  EXPECT_EQ(second->second, "def");
}

TEST(DrainedRead, AFullReadLeavesTheRestToTheNextRead) {
  socket_pair s;
  drained_reader reader(s.ours);
  net::write(s.peer, net::buffer(std::string(100, 'x')));
  s.idle(10ms);
  std::string all;
  for (int i = 0; i < 10 && all.size() < 100; ++i) {
    auto r = s.read(reader, 10, 500ms);
    ASSERT_TRUE(r) << "read " << i << " never completed";
    all += r->second;
  }
  EXPECT_EQ(all, std::string(100, 'x'));
}

TEST(DrainedRead, ThePeersCloseIsAnEof) {
  socket_pair s;
  drained_reader reader(s.ours);
  net::write(s.peer, net::buffer(std::string("abc")));
  ASSERT_TRUE(s.read(reader, 4096));
  s.peer.shutdown(tcp::socket::shutdown_send);
  auto r = s.read(reader, 4096);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, net::error::eof);
}

TEST(DrainedRead, ClosingTheSocketEndsAPendingRead) {
  socket_pair s;
  drained_reader reader(s.ours);
  net::write(s.peer, net::buffer(std::string("abc")));
  ASSERT_TRUE(s.read(reader, 4096));
  std::optional<error_code> result;
  std::string buffer(64, '\0');
  reader.async_read_some(net::buffer(buffer), [&](error_code ec, std::size_t) { result = ec; });
  net::steady_timer later(s.io, 20ms);
  later.async_wait([&](error_code) { s.ours.close(); });
  s.io.restart();
  s.io.run_for(2s);
  ASSERT_TRUE(result);
  EXPECT_EQ(*result, net::error::operation_aborted);
}

}  // namespace
}  // namespace tokengate
