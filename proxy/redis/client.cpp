#include "redis/client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

namespace tokengate::redis {

using steady = std::chrono::steady_clock;

struct client::connection {
  explicit connection(const net::any_io_executor& ex)
      : socket(ex), wake(ex), watch(ex), connect_deadline(ex) {}
  struct waiting {
    callback done;
    steady::time_point since;
    bool handshake = false;  // AUTH, SELECT, SCRIPT LOAD: not a request's command
  };
  tcp::socket socket;
  net::steady_timer wake;  // the writer's signal: commands to write
  net::steady_timer watch;
  net::steady_timer connect_deadline;
  std::string out;  // commands not yet written
  std::string in;   // reply bytes not yet parsed
  std::deque<waiting> queue;
  bool ready = false;  // connected: the writer may write
  bool closed = false;
};

client::client(net::any_io_executor executor, const config::redis_settings& settings,
               std::vector<std::string> scripts, store_health& health)
    : executor_(std::move(executor)),
      settings_(settings),
      scripts_(std::move(scripts)),
      health_(health) {}

// The process is stopping: callbacks are dropped, not run (what they would
// report to may be gone already).
client::~client() {
  stopped_ = true;
  if (!current_) return;
  current_->closed = true;
  current_->queue.clear();
  error_code ignored;
  current_->socket.close(ignored);
}

void client::send(std::vector<std::string> args, callback done) {
  if (stopped_) return done(std::nullopt);
  if (!current_) {
    if (steady::now() < retry_at_) return done(std::nullopt);
    open_connection();
  }
  auto& c = *current_;
  if (c.queue.size() >= max_waiting) return done(std::nullopt);
  append_command(c.out, args);
  c.queue.push_back({std::move(done), steady::now(), false});
  if (c.ready) c.wake.cancel();
}

void client::stop() {
  stopped_ = true;
  if (current_) close(current_, "stopped");
}

void client::open_connection() {
  current_ = std::make_shared<connection>(executor_);
  handshake(*current_);
  net::co_spawn(executor_, run(current_), net::detached);
}

// The first commands of every connection, ahead of any request's.
void client::handshake(connection& c) {
  std::weak_ptr<connection> weak = current_;
  auto expect_ok = [this, weak](std::string what) {
    return [this, weak, what](std::optional<reply> r) {
      if (r && !r->is_error()) return;
      if (auto c = weak.lock()) close(c, what + (r ? " refused: " + r->text : " got no reply"));
    };
  };
  auto queue = [&](std::vector<std::string> args, callback done) {
    append_command(c.out, args);
    c.queue.push_back({std::move(done), steady::now(), true});
  };
  if (!settings_.password.empty()) queue({"AUTH", settings_.password}, expect_ok("AUTH"));
  if (settings_.database != 0)
    queue({"SELECT", std::to_string(settings_.database)}, expect_ok("SELECT"));
  for (const auto& script : scripts_) queue({"SCRIPT", "LOAD", script}, expect_ok("SCRIPT LOAD"));
}

net::awaitable<void> client::run(std::shared_ptr<connection> c) {
  tcp::resolver resolver(executor_);
  auto [rec, endpoints] =
      co_await resolver.async_resolve(settings_.host, std::to_string(settings_.port), use_tuple);
  if (c->closed) co_return;
  if (rec) {
    close(c, "cannot resolve " + settings_.host + ": " + rec.message());
    co_return;
  }
  // A connect that hangs (a dropped SYN) ends after a second.
  c->connect_deadline.expires_after(std::chrono::seconds(1));
  c->connect_deadline.async_wait([c](const error_code& ec) {
    if (!ec && !c->ready) {
      error_code ignored;
      c->socket.close(ignored);
    }
  });
  auto [cec, endpoint] = co_await net::async_connect(c->socket, endpoints, use_tuple);
  c->connect_deadline.cancel();
  if (c->closed) co_return;
  if (cec) {
    close(c, "connect: " + cec.message());
    co_return;
  }
  error_code ignored;
  c->socket.set_option(tcp::no_delay(true), ignored);
  c->ready = true;
  net::co_spawn(executor_, write_loop(c), net::detached);
  net::co_spawn(executor_, watchdog(c), net::detached);
  co_await read_loop(c);
}

net::awaitable<void> client::write_loop(std::shared_ptr<connection> c) {
  std::string writing;
  while (!c->closed) {
    if (c->out.empty()) {
      c->wake.expires_at(steady::time_point::max());
      co_await c->wake.async_wait(use_tuple);
      continue;
    }
    writing.clear();
    writing.swap(c->out);
    auto [ec, n] = co_await net::async_write(c->socket, net::buffer(writing), use_tuple);
    if (ec) {
      close(c, "write: " + ec.message());
      co_return;
    }
  }
}

net::awaitable<void> client::read_loop(std::shared_ptr<connection> c) {
  char chunk[16384];
  while (!c->closed) {
    auto [ec, n] = co_await c->socket.async_read_some(net::buffer(chunk), use_tuple);
    if (c->closed) co_return;
    if (ec) {
      close(c, ec == net::error::eof ? "it closed the connection" : ec.message());
      co_return;
    }
    c->in.append(chunk, n);
    std::size_t used = 0;
    try {
      while (!c->closed) {
        std::size_t consumed = 0;
        auto r = parse_reply(std::string_view(c->in).substr(used), consumed);
        if (!r) break;
        used += consumed;
        if (c->queue.empty()) throw protocol_error("a reply to no command");
        auto w = std::move(c->queue.front());
        c->queue.pop_front();
        if (!w.handshake) health_.answered();
        w.done(std::move(*r));
      }
    } catch (const protocol_error& e) {
      {
        close(c, std::string("a reply broke the protocol: ") + e.what());
        co_return;
      }
    }
    c->in.erase(0, used);
  }
}

net::awaitable<void> client::watchdog(std::shared_ptr<connection> c) {
  while (!c->closed) {
    c->watch.expires_after(std::chrono::milliseconds(250));
    co_await c->watch.async_wait(use_tuple);
    if (c->closed) co_return;
    if (!c->queue.empty() && steady::now() - c->queue.front().since > stall_after) {
      close(c, "no reply for a second");
      co_return;
    }
  }
}

void client::close(std::shared_ptr<connection> c, std::string_view why) {
  if (c->closed) return;
  c->closed = true;
  error_code ignored;
  c->socket.close(ignored);
  c->wake.cancel();
  c->watch.cancel();
  c->connect_deadline.cancel();
  if (current_ == c) {
    current_.reset();
    retry_at_ = steady::now() + retry_after;
  }
  if (!stopped_) health_.failed(why);
  auto queue = std::move(c->queue);
  c->queue.clear();
  for (auto& w : queue) w.done(std::nullopt);
}

}  // namespace tokengate::redis
