// The probe behind the start-up warning that a port is shared with another
// process (port_in_use.hpp): a listening socket is found, whatever options
// it was opened with; a free port, one left in TIME_WAIT by a process that
// stopped, and port 0 are not.
#include "io/port_in_use.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace tokengate {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

tcp::endpoint loopback(std::uint16_t port) { return {net::ip::address_v4::loopback(), port}; }

// Opened as the server opens its listeners: SO_REUSEADDR and SO_REUSEPORT.
tcp::acceptor listening_as_tokengate(net::io_context& io, std::uint16_t port = 0) {
  tcp::acceptor a(io);
  a.open(tcp::v4());
  a.set_option(tcp::acceptor::reuse_address(true));
  a.set_option(net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>(true));
  a.bind(loopback(port));
  a.listen();
  return a;
}

TEST(PortInUse, AListenerOpenedAsTokengateOpensItsIsFound) {
  net::io_context io;
  auto a = listening_as_tokengate(io);
  EXPECT_TRUE(port_already_listened(a.local_endpoint()));
}

TEST(PortInUse, AListenerWithoutReusePortIsFound) {
  net::io_context io;
  tcp::acceptor a(io, loopback(0));
  EXPECT_TRUE(port_already_listened(a.local_endpoint()));
}

TEST(PortInUse, APortClosedAgainIsFree) {
  net::io_context io;
  std::uint16_t port;
  {
    auto a = listening_as_tokengate(io);
    port = a.local_endpoint().port();
  }
  EXPECT_FALSE(port_already_listened(loopback(port)));
}

// A proxy restarted on its port finds its old connections in TIME_WAIT
// there (the server side closed first): not another process listening.
TEST(PortInUse, ConnectionsLeftInTimeWaitDoNotCount) {
  net::io_context io;
  std::uint16_t port;
  {
    auto a = listening_as_tokengate(io);
    port = a.local_endpoint().port();
    tcp::socket client(io);
    client.connect(a.local_endpoint());
    auto served = a.accept();
    served.close();  // the server's side closes first and keeps the TIME_WAIT
    char byte;
    boost::system::error_code ec;
    client.read_some(net::buffer(&byte, 1), ec);  // the close arrives
    EXPECT_EQ(ec, net::error::eof);
  }
  EXPECT_FALSE(port_already_listened(loopback(port)));
  auto again = listening_as_tokengate(io, port);  // as the real bind: the port is taken again
  EXPECT_EQ(again.local_endpoint().port(), port);
}

TEST(PortInUse, PortZeroIsNeverShared) { EXPECT_FALSE(port_already_listened(loopback(0))); }

}  // namespace
}  // namespace tokengate
