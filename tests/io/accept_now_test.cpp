// The accept loop's accept: a connection comes non-blocking and
// close-on-exec, with its peer's address, and Asio's reads and close work on
// it as on a socket Asio accepted itself.
#include "io/accept_now.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <string>

namespace tokengate {
namespace {

struct listener {
  net::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(net::ip::address_v4::loopback(), 0)};
  tcp::socket client{io};
  listener() { acceptor.non_blocking(true); }

  // Connects `client` and takes its connection with accept_now.
  std::optional<tcp::socket> take_client(tcp::endpoint& peer) {
    client.connect(acceptor.local_endpoint());
    error_code ec;
    auto accepted = accept_now(acceptor, peer, ec);
    EXPECT_TRUE(accepted) << ec.message();
    return accepted;
  }
};

TEST(AcceptNow, NothingWaitingIsWouldBlock) {
  listener l;
  tcp::endpoint peer;
  error_code ec;
  EXPECT_FALSE(accept_now(l.acceptor, peer, ec));
  EXPECT_EQ(ec, net::error::would_block);
}

TEST(AcceptNow, AConnectionComesNonBlockingWithItsPeer) {
  listener l;
  tcp::endpoint peer;
  auto accepted = l.take_client(peer);
  ASSERT_TRUE(accepted);
  EXPECT_EQ(peer, l.client.local_endpoint());
  int fd = accepted->native_handle();
  EXPECT_TRUE(::fcntl(fd, F_GETFL) & O_NONBLOCK);
  EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
  EXPECT_TRUE(accepted->non_blocking())
      << "Asio must know, or its first operation switches it again";

  // Asio's asynchronous read and write work on it.
  net::write(l.client, net::buffer(std::string("ping")));
  std::string got(4, '\0');
  bool read = false;
  net::async_read(*accepted, net::buffer(got), [&](error_code rec, std::size_t) { read = !rec; });
  l.io.run();
  EXPECT_TRUE(read);
  EXPECT_EQ(got, "ping");

  // Closing it ends the connection (the client reads the end).
  accepted->close();
  char byte;
  error_code end;
  l.client.read_some(net::buffer(&byte, 1), end);
  EXPECT_EQ(end, net::error::eof);

  error_code ec;
  EXPECT_FALSE(accept_now(l.acceptor, peer, ec)) << "one connection was waiting, and it was taken";
}

// The listener's options reach the accepted socket (the accept loop sets
// them once per listener where the probe says so; this kernel is Linux,
// which copies them).
TEST(AcceptNow, ASocketAcceptedFromAListenerWithNoDelayAndInqHasThem) {
  ASSERT_TRUE(accepted_sockets_inherit_options())
      << "expected on Linux; elsewhere each socket gets them set";
  listener l;
  l.acceptor.set_option(tcp::no_delay(true));
  int on = 1;
  ASSERT_EQ(::setsockopt(l.acceptor.native_handle(), IPPROTO_TCP, TCP_INQ, &on, sizeof on), 0);
  tcp::endpoint peer;
  auto accepted = l.take_client(peer);
  ASSERT_TRUE(accepted);
  tcp::no_delay no_delay;
  accepted->get_option(no_delay);
  EXPECT_TRUE(no_delay.value());
  int inq = 0;
  socklen_t length = sizeof inq;
  ASSERT_EQ(::getsockopt(accepted->native_handle(), IPPROTO_TCP, TCP_INQ, &inq, &length), 0);
  EXPECT_EQ(inq, 1);
}

}  // namespace
}  // namespace tokengate
