#include "server/worker.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <stdexcept>

#include "io/accept_now.hpp"
#include "io/any_stream.hpp"
#include "io/drained_read.hpp"
#include "io/tls_context.hpp"
#include "io/tls_credentials.hpp"
#include "server/connection_gate.hpp"
#include "server/session.hpp"

namespace tokengate {
namespace {

// The certificate current at accept time serves this connection to its end.
any_stream tls_stream_for(tcp::socket plain, std::shared_ptr<net::ssl::context> context) {
  return any_stream(std::move(plain), std::move(context), tls_role::server);
}

}  // namespace

worker::worker(int index, std::shared_ptr<config_store> store, connection_gate& gate,
               budget::budgets& budgets, fleet::board& fleet, cache::store& cache,
               trace::exporter* tracer)
    : index_(index),
      store_(std::move(store)),
      gate_(gate),
      config_(store_->snapshot()),
      budget_gate_(io_.get_executor(), budgets),
      fleet_(fleet),
      cache_(cache),
      tracer_(tracer) {
  // Fail at start-up, not on the first request, on a bad URL or CA file.
  for (const auto& [name, settings] : config_->upstreams) upstreams_.pool_for(settings);
  bodies_.report_kept_bytes_to(metrics_.request_body_buffers_kept_bytes);
  if (cache.shared())
    shared_cache_ =
        std::make_unique<cache::redis_store>(io_.get_executor(), *cache.shared(), *cache.health());
}

worker::~worker() = default;

std::uint16_t worker::bind(const config::listener& settings, std::uint16_t port,
                           std::shared_ptr<tls_credentials> tls) {
  auto address = net::ip::make_address(settings.address);
  tcp::endpoint endpoint(address, port);
  auto acceptor = std::make_unique<tcp::acceptor>(io_);
  acceptor->open(endpoint.protocol());
  acceptor->set_option(tcp::acceptor::reuse_address(true));
  acceptor->set_option(net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>(true));
  error_code ec;
  acceptor->bind(endpoint, ec);
  if (ec)  // an operator's mistake: say which listener, not where in Asio
    throw std::runtime_error("cannot listen on " + settings.address + ":" + std::to_string(port) +
                             " (listener '" + settings.name + "'): " + ec.message());
  acceptor->listen(net::socket_base::max_listen_connections);
  acceptor->non_blocking(true);  // (accept_now takes connections without waiting)
  bool inherited = accepted_sockets_inherit_options();
  if (inherited) {
    acceptor->set_option(tcp::no_delay(true));
    if (!tls) {
      int on = 1;
      inherited =
          ::setsockopt(acceptor->native_handle(), IPPROTO_TCP, TCP_INQ, &on, sizeof on) == 0;
    }
  }
  auto bound = acceptor->local_endpoint().port();
  listeners_.push_back(bound_listener{&settings, std::move(tls), std::move(acceptor), inherited});
  return bound;
}

void worker::start_accepting() {
  for (auto& l : listeners_) net::co_spawn(io_, accept_loop(l), net::detached);
}

net::awaitable<std::optional<connection_ticket>> worker::admit(bound_listener& l,
                                                               const net::ip::address& client) {
  if (auto ticket = gate_.try_admit(client)) co_return ticket;
  // At limits.max_connections: this connection waits here unserved, and the
  // accept loop with it, so later clients wait in the listen backlog (as with
  // HAProxy's maxconn). A 5 ms poll costs nothing next to thousands of open
  // streams.
  metrics_.downstream_cx_accept_paused.add();
  // At a sustained limit this pauses once per closed connection: log at most
  // every 10 s (the counter has every pause).
  auto now = std::chrono::steady_clock::now();
  if (now - last_pause_logged_ >= std::chrono::seconds(10)) {
    last_pause_logged_ = now;
    spdlog::warn(
        "listener '{}' (worker {}): {} client connections open, at limits.max_connections; "
        "new connections wait until one closes",
        l.settings->name, index_, gate_.open());
  }
  net::steady_timer pause(io_);
  for (;;) {
    pause.expires_after(std::chrono::milliseconds(5));
    co_await pause.async_wait(use_tuple);
    if (auto ticket = gate_.try_admit(client)) co_return ticket;
    if (!l.acceptor->is_open()) co_return std::nullopt;
  }
}

// Connections accepted in a row before the loop lets the worker's other
// work run: a burst of thousands taken in one go would hold up every open
// stream's next event until the last was taken. (The pacer then spaces
// their set-ups: server/setup_pacer.hpp.)
constexpr int accepts_per_turn = 8;

net::awaitable<void> worker::accept_loop(bound_listener& l) {
  int in_a_row = 0;
  for (;;) {
    if (!l.acceptor->is_open()) co_return;  // draining
    if (in_a_row == accepts_per_turn) {
      in_a_row = 0;
      co_await net::post(io_, net::use_awaitable);
      continue;
    }
    // Every waiting connection is taken before the loop waits again: epoll
    // reports the listener by edge, once for all that wait.
    // (The peer's address comes with the accept: no getpeername per connection.)
    tcp::endpoint peer;
    error_code ec;
    auto accepted = accept_now(*l.acceptor, peer, ec);
    if (!accepted) {
      if (ec == net::error::would_block || ec == net::error::try_again) {
        in_a_row = 0;
        auto [wec] = co_await l.acceptor->async_wait(tcp::acceptor::wait_read, use_tuple);
        if (wec && (wec == net::error::operation_aborted || !l.acceptor->is_open())) co_return;
        continue;
      }
      if (ec == net::error::connection_aborted) continue;  // gone before it was taken
      if (!l.acceptor->is_open()) co_return;
      // EMFILE and friends: log, back off briefly, keep serving the others.
      spdlog::warn("accept on {} failed: {}", l.settings->name, ec.message());
      net::steady_timer pause(io_, std::chrono::milliseconds(50));
      co_await pause.async_wait(use_tuple);
      continue;
    }
    ++in_a_row;
    auto& socket = *accepted;
    prepare_accepted(l, socket);
    auto ticket = co_await admit(l, peer.address());
    if (!ticket) co_return;  // draining: the connection closes unserved
    start_session(l, std::move(socket), std::move(*ticket));
  }
}

void worker::prepare_accepted(const bound_listener& l, tcp::socket& socket) {
  error_code ignored;
  if (!l.options_inherited) socket.set_option(tcp::no_delay(true), ignored);
  // The read that takes a request whole tells (TCP_INQ) that nothing is
  // left, and the next read (the client watcher's, or the next request's)
  // waits for epoll instead of trying first and failing: two recv calls a
  // request that find nothing (io/drained_read.hpp; TLS reads go
  // through the TLS engine instead). The socket is non-blocking from the
  // accept, and Asio knows it, so the first read is a drained read too.
  if (!l.tls) {
    if (!l.options_inherited) enable_drained_reads(socket);
    // The client sends its request once its connect returns, which is
    // about now: a read at once finds nothing (EAGAIN) unless the loop
    // is behind, so the first read waits for epoll, as nginx's does.
    wait_for_next_report(socket);
  }
}

void worker::start_session(bound_listener& l, tcp::socket socket, connection_ticket ticket) {
  auto stream =
      l.tls ? tls_stream_for(std::move(socket), l.tls->current()) : any_stream(std::move(socket));
  net::co_spawn(io_, run_session(std::move(stream), std::move(ticket), *this, *l.settings),
                net::detached);
}

void worker::begin_drain() {
  draining_.store(true, std::memory_order_relaxed);
  auto idle = std::move(idle_);
  idle_.clear();
  for (auto* stream : idle) stream->close();
  // Closing a listener resets every connection the kernel has queued on it
  // (completed, often with the request sent): in a binary upgrade those are
  // the clients that connected just before the SIGTERM. They are taken
  // now and served like any other; a connection that comes between the
  // last accept and the close is still reset (the kernel can move those to
  // another process on the port instead: net.ipv4.tcp_migrate_req,
  // docs/operations.md).
  // Beyond limits.max_connections they close unserved, as connections
  // waiting for a place do once the drain begins.
  for (auto& l : listeners_) {
    tcp::endpoint peer;
    error_code ec;
    for (;;) {
      auto accepted = accept_now(*l.acceptor, peer, ec);
      if (!accepted && ec == net::error::connection_aborted) continue;  // gone before it was taken
      if (!accepted) break;  // none left (or EMFILE: the rest are reset with the close)
      prepare_accepted(l, *accepted);
      if (auto ticket = gate_.try_admit(peer.address()))
        start_session(l, std::move(*accepted), std::move(*ticket));
    }
    l.acceptor->close(ec);
  }
}

}  // namespace tokengate
