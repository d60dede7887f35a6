// A TLS read that OpenSSL could not finish because it had to write first
// (a key update's answer, an alert) while the socket had no room:
// tls_direct_read_done takes it on as a wait for room, then tries the read
// again. No test through the binary reaches that branch: the kernel
// appends a few bytes to the last segment still queued whenever it has
// room, so OpenSSL's small writes from a read are taken even when the
// proxy's own writes wait (Tls.AKeyUpdateAsked..., instrumented in session
// 33). Here the attempt answers as OpenSSL would, over a real socket.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "io/any_stream.hpp"

namespace tokengate {
namespace {

using namespace std::chrono_literals;
using wait_for = tls_direct::wait_for;

struct tls_socket_pair {
  net::io_context io;
  tcp::socket ours{io};
  tcp::socket peer{io};

  tls_socket_pair() {
    tcp::acceptor acceptor(io, tcp::endpoint(net::ip::address_v4::loopback(), 0));
    peer.connect(acceptor.local_endpoint());
    acceptor.accept(ours);
    ours.non_blocking(true);
  }
  // Writes to `ours` until the kernel takes no more (the peer reads nothing).
  std::size_t fill_ours() {
    std::string bytes(64 * 1024, 'x');
    std::size_t total = 0;
    for (;;) {
      auto n = ::send(ours.native_handle(), bytes.data(), bytes.size(), MSG_DONTWAIT);
      if (n <= 0) return total;
      total += static_cast<std::size_t>(n);
    }
  }
};

// What the handler got, once.
struct outcome {
  std::optional<std::pair<error_code, std::size_t>> got;
  int calls = 0;
};

// The attempts' answers in turn, as OpenSSL's SSL_read would give them.
struct scripted_read {
  std::vector<tls_direct::io_result>* answers;
  int* tries;
  tls_direct::io_result operator()() const {
    return (*answers)[static_cast<std::size_t>((*tries)++)];
  }
};

// Runs `io` until `done()` holds or 2 s have passed.
template <typename Done>
void run_until(net::io_context& io, Done done) {
  auto deadline = std::chrono::steady_clock::now() + 2s;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    if (io.stopped()) io.restart();
    io.run_one_for(20ms);
  }
}

auto record(outcome& o) {
  return [&o](error_code ec, std::size_t n) {
    o.got.emplace(ec, n);
    ++o.calls;
  };
}

TEST(TlsDirectOps, AReadThatMustWriteFirstWaitsForRoomAndTriesAgain) {
  tls_socket_pair s;
  auto queued = s.fill_ours();
  ASSERT_GT(queued, 0u);
  std::vector<tls_direct::io_result> answers{{0, {}, wait_for::readable},
                                             {7, {}, wait_for::nothing}};
  int tries = 0;
  outcome o;
  tls_direct_read_done<scripted_read, decltype(record(o))> done{
      &s.ours, scripted_read{&answers, &tries}, record(o)};
  done(net::error::would_block, 0);
  s.io.run_for(200ms);
  EXPECT_EQ(tries, 0) << "tried again before the socket had room";
  EXPECT_EQ(o.calls, 0);
  // The peer reads everything: room, so the read is tried again; it now
  // needs bytes, which the peer then sends.
  std::string sink(queued, '\0');
  net::read(s.peer, net::buffer(sink));
  run_until(s.io, [&] { return tries == 1; });
  EXPECT_EQ(tries, 1);
  s.io.restart();
  s.io.run_for(100ms);
  EXPECT_EQ(o.calls, 0) << "the read said it needs bytes: it waits for them";
  EXPECT_EQ(tries, 1);
  net::write(s.peer, net::buffer(std::string("x")));
  run_until(s.io, [&] { return o.calls > 0; });
  EXPECT_EQ(tries, 2);
  ASSERT_EQ(o.calls, 1);
  EXPECT_FALSE(o.got->first);
  EXPECT_EQ(o.got->second, 7u);
}

TEST(TlsDirectOps, AReadThatMustWriteFirstEndsWithTheSocketsClose) {
  tls_socket_pair s;
  s.fill_ours();
  std::vector<tls_direct::io_result> answers{{7, {}, wait_for::nothing}};
  int tries = 0;
  outcome o;
  tls_direct_read_done<scripted_read, decltype(record(o))> done{
      &s.ours, scripted_read{&answers, &tries}, record(o)};
  done(net::error::would_block, 0);
  s.io.run_for(50ms);
  s.ours.close();  // (what a deadline's end does)
  run_until(s.io, [&] { return o.calls > 0; });
  EXPECT_EQ(tries, 0);
  ASSERT_EQ(o.calls, 1);
  EXPECT_EQ(o.got->first, net::error::operation_aborted);
}

TEST(TlsDirectOps, AReadThatDidNotHaveToWriteGoesStraightToItsHandler) {
  tls_socket_pair s;
  std::vector<tls_direct::io_result> answers;
  int tries = 0;
  outcome o;
  tls_direct_read_done<scripted_read, decltype(record(o))> done{
      &s.ours, scripted_read{&answers, &tries}, record(o)};
  done(error_code(), 5);
  EXPECT_EQ(tries, 0);
  ASSERT_EQ(o.calls, 1);
  EXPECT_EQ(o.got->second, 5u);
}

}  // namespace
}  // namespace tokengate
