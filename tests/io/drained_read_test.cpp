// The relay's upstream read, which skips the recv attempt after a short read
// and relies on epoll's edge for what comes next: no byte and no end of the
// stream may be missed in any order of "bytes arrive", "the peer closes or
// resets" and "a read starts".
#include "io/drained_read.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace tokengate {
namespace {

using namespace std::chrono_literals;
using read_result = std::optional<std::pair<error_code, std::string>>;

struct socket_pair {
  net::io_context io;
  tcp::socket ours{io.get_executor()};
  tcp::socket peer{io};

  explicit socket_pair(bool with_tcp_inq = true) {
    tcp::acceptor acceptor(io, tcp::endpoint(net::ip::address_v4::loopback(), 0));
    peer.connect(acceptor.local_endpoint());
    acceptor.accept(ours);
    if (with_tcp_inq) {
      EXPECT_TRUE(enable_drained_reads(ours));
    }
    // Any asynchronous operation makes Asio switch the socket to
    // non-blocking, after which every read takes the drained path.
    ours.async_wait(tcp::socket::wait_write, [](error_code) {});
    io.run();
  }

  // Starts a read of up to `size` bytes, runs `meanwhile` on the context's
  // thread 20 ms later (with the read pending), and runs the context until
  // the read completes or `timeout` passes.
  read_result read(drained_reader& reader, std::size_t size, std::chrono::milliseconds timeout = 2s,
                   std::function<void()> meanwhile = {}) {
    std::string buffer(size, '\0');
    read_result result;
    reader.async_read_some(net::buffer(buffer), [&](error_code ec, std::size_t n) {
      result.emplace(ec, buffer.substr(0, n));
    });
    net::steady_timer later(io, 20ms);
    if (meanwhile)
      later.async_wait([&](error_code ec) {
        if (!ec) meanwhile();
      });
    io.restart();
    auto until = std::chrono::steady_clock::now() + timeout;
    while (!result && std::chrono::steady_clock::now() < until) io.run_one_until(until);
    later.cancel();
    io.restart();
    io.poll();
    return result;
  }

  // Runs the context (so that epoll reports the socket) with no read pending.
  void idle(std::chrono::milliseconds how_long) {
    net::steady_timer t(io, how_long);
    t.async_wait([](error_code) {});
    io.restart();
    io.run();
  }

  // `bytes` must be "abc", and the read after it must end with `end` at
  // once: the end was queued behind the bytes, so a read that waits for a
  // new epoll edge would never get one.
  void expect_abc_then(drained_reader& reader, const read_result& bytes, error_code end,
                       const char* what) {
    ASSERT_TRUE(bytes);
    EXPECT_EQ(bytes->second, "abc");
    auto after = read(reader, 4096, 500ms);
    ASSERT_TRUE(after)
        << "the " << what
        << " was queued behind the bytes, and the read waited for an edge already used";
    EXPECT_EQ(after->first, end);
  }

  void send(const std::string& bytes) { net::write(peer, net::buffer(bytes)); }

  // Sends "abc" and reads it; returns how many reads the reader believed.
  std::size_t read_abc(drained_reader& reader) {
    send("abc");
    auto r = read(reader, 4096);
    EXPECT_TRUE(r && !r->first && r->second == "abc");
    return reader.believed();
  }
  void reset() {
    peer.set_option(net::socket_base::linger(true, 0));  // close with RST
    peer.close();
  }
};

TEST(DrainedRead, IsInEffectWithThisBoost) {
#ifndef TOKENGATE_DRAINED_READ
  FAIL()
      << "Boost is not 1.81 here: the relay falls back to Asio's read, one EAGAIN recv per event; "
         "port drained_read_detail::read_op to this version";
#endif
}

TEST(DrainedRead, AShortReadIsBelievedAndBytesAfterItWakeThePendingRead) {
  socket_pair s;
  drained_reader reader(s.ours);
  EXPECT_EQ(s.read_abc(reader), 1u)
      << "nothing was queued behind the bytes: the next read need not try first";

  auto second = s.read(reader, 64, 2s, [&] { s.send("def"); });
  ASSERT_TRUE(second) << "bytes after a believed read did not wake the read waiting for them";
  EXPECT_FALSE(second->first);
  EXPECT_EQ(second->second, "def");
}

TEST(DrainedRead, WithoutTcpInqNoReadIsBelieved) {
  socket_pair s(false);
  drained_reader reader(s.ours);
  EXPECT_EQ(s.read_abc(reader), 0u) << "without TCP_INQ a queued FIN cannot be seen";
}

// The arrival stamp (relay delay, and the benchmark's transit, which leaves
// out how long bytes waited for the load's read) is when the bytes reached
// the kernel, not when they were read.
TEST(DrainedRead, TheArrivalStampIsWhenTheBytesArrivedNotWhenTheyWereRead) {
  socket_pair s;
  ASSERT_TRUE(enable_receive_timestamps(s.ours));
  drained_reader reader(s.ours);
  auto real_now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  // The kernel turns packet stamping on a moment after the first socket
  // asks (a deferred switch): wait until a byte comes stamped.
  for (int tries = 0; tries < 100 && reader.last_arrival_ns() == 0; ++tries) {
    s.send("x");
    ASSERT_TRUE(s.read(reader, 4096));
    if (reader.last_arrival_ns() == 0) s.idle(10ms);
  }
  ASSERT_NE(reader.last_arrival_ns(), 0) << "no read came with an arrival stamp within a second";

  auto sent = real_now_ns();
  s.send("abc");
  s.idle(40ms);
  auto read_at = real_now_ns();
  ASSERT_TRUE(s.read(reader, 4096));
  auto arrived = reader.last_arrival_ns();
  ASSERT_NE(arrived, 0) << "the read took no arrival stamp";
  EXPECT_GE(arrived, sent - 1'000'000) << "stamped before the bytes were sent";
  EXPECT_LE(arrived, sent + 20'000'000) << "stamped when read (40 ms later), not when they arrived";
  EXPECT_GE(read_at - arrived, 20'000'000) << "the 40 ms the bytes waited for the read do not show";

  s.send("def");  // a later read takes its own bytes' stamp
  s.idle(5ms);
  ASSERT_TRUE(s.read(reader, 4096));
  EXPECT_GT(reader.last_arrival_ns(), arrived + 30'000'000);
}

TEST(DrainedRead, BytesThatArriveWhileNoReadIsPendingAreReadAtOnce) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.send("abc");
  ASSERT_TRUE(s.read(reader, 4096));
  // The edge for these bytes is seen by epoll while nothing waits on the
  // socket: the reactor remembers it, and the next read tries at once.
  s.send("def");
  s.idle(30ms);
  auto second = s.read(reader, 4096, 500ms);
  ASSERT_TRUE(second) << "the bytes were there but the read waited for an edge that had passed";
  EXPECT_EQ(second->second, "def");
}

TEST(DrainedRead, AFullReadLeavesTheRestToTheNextRead) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.send(std::string(100, 'x'));
  s.idle(10ms);
  std::string all;
  for (int i = 0; i < 10 && all.size() < 100; ++i) {
    auto r = s.read(reader, 10, 500ms);
    ASSERT_TRUE(r) << "read " << i << " never completed";
    all += r->second;
  }
  EXPECT_EQ(all, std::string(100, 'x'));
}

// What the kernel still holds after a read is what the relay grows its
// buffer by (the upstream is ahead of it).
TEST(DrainedRead, TellsHowManyBytesTheKernelStillHoldsAfterARead) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.send(std::string(100, 'x'));
  s.idle(10ms);
  auto first = s.read(reader, 30, 500ms);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->second.size(), 30u);
  EXPECT_EQ(reader.last_queued(), 70u);
  auto rest = s.read(reader, 4096, 500ms);
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->second.size(), 70u);
  EXPECT_EQ(reader.last_queued(), 0u);
}

// The bytes and the end arrive together while a read waits: one epoll report
// for both, and the read that takes the bytes must not be believed.
TEST(DrainedRead, BytesWithAResetBehindThemEndInTheReset) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.send("x");
  ASSERT_TRUE(s.read(reader, 4096));  // believed: the next read waits for epoll
  auto bytes = s.read(reader, 4096, 2s, [&] {
    s.send("abc");
    s.reset();
  });
  s.expect_abc_then(reader, bytes, net::error::connection_reset, "reset");
}

TEST(DrainedRead, BytesWithAFinBehindThemEndInAnEof) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.send("x");
  ASSERT_TRUE(s.read(reader, 4096));
  auto bytes = s.read(reader, 4096, 2s, [&] {
    s.send("abc");
    s.peer.shutdown(tcp::socket::shutdown_send);
  });
  s.expect_abc_then(reader, bytes, net::error::eof, "FIN");
}

// The same, with epoll's report taken while no read was pending: the next
// read's attempt then finds the bytes and the end behind them.
TEST(DrainedRead, BytesWithAResetBehindThemSeenWhileNoReadWaitsEndInTheReset) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.send("abc");
  s.reset();
  s.idle(30ms);
  s.expect_abc_then(reader, s.read(reader, 4096), net::error::connection_reset, "reset");
}

TEST(DrainedRead, ThePeersCloseIsAnEof) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.send("abc");
  ASSERT_TRUE(s.read(reader, 4096));
  s.peer.shutdown(tcp::socket::shutdown_send);
  auto r = s.read(reader, 4096);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, net::error::eof);
}

TEST(DrainedRead, ClosingTheSocketEndsAPendingRead) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.send("abc");
  ASSERT_TRUE(s.read(reader, 4096));
  auto r = s.read(reader, 64, 2s, [&] { s.ours.close(); });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, net::error::operation_aborted);
}

// read_now: the same read taken without waiting, where Asio's read would
// have tried at once; whatever it leaves, the ordinary read after it must
// still get every byte and the end.
struct read_now_result {
  bool read = false;
  error_code ec;
  std::string bytes;
};
read_now_result read_now(drained_reader& reader, std::size_t size = 4096) {
  std::string buffer(size, '\0');
  read_now_result r;
  std::size_t n = 0;
  r.read = reader.read_now(net::buffer(buffer), r.ec, n);
  r.bytes = buffer.substr(0, n);
  return r;
}

TEST(DrainedRead, ReadNowTakesBytesAlreadyReportedAndLeavesTheNextReadToWait) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.send("abc");
  s.idle(20ms);  // epoll reports the bytes while no read waits
  auto now = read_now(reader);
  ASSERT_TRUE(now.read) << "the bytes were there and reported";
  EXPECT_FALSE(now.ec);
  EXPECT_EQ(now.bytes, "abc");
  EXPECT_EQ(reader.believed(), 1u);
  EXPECT_FALSE(read_now(reader).read) << "a believed read leaves nothing to try";
  auto later = s.read(reader, 64, 2s, [&] { s.send("def"); });
  ASSERT_TRUE(later) << "bytes after read_now did not wake the read waiting for them";
  EXPECT_EQ(later->second, "def");
}

TEST(DrainedRead, ReadNowThatFindsNothingLeavesTheReadToWaitForTheBytes) {
  socket_pair s;
  drained_reader reader(s.ours);
  auto now = read_now(reader);  // a new socket: Asio would try, and nothing is there
  EXPECT_FALSE(now.read);
  EXPECT_FALSE(now.ec);
  auto later = s.read(reader, 64, 2s, [&] { s.send("def"); });
  ASSERT_TRUE(later) << "the read after a failed read_now waited for an edge that never came";
  EXPECT_EQ(later->second, "def");
}

// After a believed read Asio would wait for epoll's next report, so
// read_now does not try (no syscall) even if bytes have come meanwhile;
// the report then wakes the ordinary read.
TEST(DrainedRead, ReadNowDoesNotTryWhereAsioWouldWait) {
  socket_pair s;
  drained_reader reader(s.ours);
  EXPECT_EQ(s.read_abc(reader), 1u);
  s.send("def");  // (the context does not run: epoll has not reported it)
  EXPECT_FALSE(read_now(reader).read);
  auto later = s.read(reader, 64, 500ms);
  ASSERT_TRUE(later) << "the bytes were lost between read_now and the read";
  EXPECT_EQ(later->second, "def");
}

TEST(DrainedRead, ReadNowTakesBytesWithAFinBehindThemThenTheEof) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.send("abc");
  s.peer.shutdown(tcp::socket::shutdown_send);
  s.idle(20ms);
  auto bytes = read_now(reader);
  ASSERT_TRUE(bytes.read);
  EXPECT_EQ(bytes.bytes, "abc");
  EXPECT_EQ(reader.believed(), 0u) << "a FIN was queued behind the bytes";
  auto end = read_now(reader);
  ASSERT_TRUE(end.read) << "the FIN was queued: the next read_now must take it";
  EXPECT_EQ(end.ec, net::error::eof);
}

// wait_for_next_report: the next read waits for epoll, and whatever is
// readable is still read, reported before or after.
TEST(DrainedRead, AfterWaitForNextReportBytesSentLaterWakeTheRead) {
  socket_pair s;
  drained_reader reader(s.ours);
  wait_for_next_report(s.ours);
  EXPECT_FALSE(read_now(reader).read) << "the reactor must now wait for a report";
  auto later = s.read(reader, 64, 2s, [&] { s.send("abc"); });
  ASSERT_TRUE(later) << "the bytes' report did not wake the read";
  EXPECT_EQ(later->second, "abc");
}

TEST(DrainedRead, WaitForNextReportLeavesBytesAlreadyReportedToBeRead) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.send("abc");
  s.idle(20ms);  // reported while no read waits
  wait_for_next_report(s.ours);
  auto now = read_now(reader);
  ASSERT_TRUE(now.read) << "the last report showed bytes: the read must still try";
  EXPECT_EQ(now.bytes, "abc");
}

TEST(DrainedRead, WaitForNextReportBeforeTheBytesReportIsTakenLosesNothing) {
  socket_pair s;
  drained_reader reader(s.ours);
  s.idle(10ms);   // a report with nothing to read (the socket's first)
  s.send("abc");  // arrives, not reported yet
  wait_for_next_report(s.ours);
  auto r = s.read(reader, 64, 500ms);
  ASSERT_TRUE(r) << "the edge for bytes that came after the last report was lost";
  EXPECT_EQ(r->second, "abc");
}

}  // namespace
}  // namespace tokengate
