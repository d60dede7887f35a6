// Upstream faults: the client always gets a clear, well-framed answer.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <thread>

#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"
#include "support/hand_upstream.hpp"
#include "support/observed.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

struct collected final : stream::sse_sink {
  void on_event(const stream::sse_event& e) override {
    events.push_back({std::string(e.type), std::string(e.data)});
  }
  std::vector<std::pair<std::string, std::string>> events;
};

collected events_of(const std::string& body) {
  stream::sse_parser p;
  collected c;
  p.feed(body, c);
  return c;
}

TEST(Failures, UpstreamResetMidStreamEndsWithAnErrorEventAndProperFraming) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json(
      "/v1/chat/completions",
      R"({"model":"demo","stream":true,"demo":{"tokens":10,"interval_ms":10,"reset_after":3}})"));
  auto r = read_response(c, 5s);
  ASSERT_TRUE(r.complete) << "the chunked body must be terminated, not cut";
  EXPECT_EQ(r.status, 200);
  auto events = events_of(r.body).events;
  ASSERT_GE(events.size(), 2u);
  auto last = boost::json::parse(events.back().second);
  EXPECT_EQ(last.at("error").at("code").as_string(), "upstream_disconnected");
  EXPECT_EQ(r.body.find("[DONE]"), std::string::npos) << "a cut stream must not look complete";
  EXPECT_TRUE(wait_until(
      [&] {
        return http_get(f.admin_port(), "/metrics")
                   .body.find("tokengate_downstream_rq_stream_failed_total 1\n") !=
               std::string::npos;
      },
      2s, "the failure to be counted"));
  // The connection is still usable.
  c.clear();
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","max_tokens":1})"));
  EXPECT_EQ(read_response(c).status, 200);
}

TEST(Failures, AnthropicStreamFailureUsesAnthropicErrorEvent) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json(
      "/v1/messages",
      R"({"model":"demo","stream":true,"max_tokens":10,"demo":{"tokens":10,"interval_ms":10,"reset_after":2}})"));
  auto r = read_response(c, 5s);
  ASSERT_TRUE(r.complete);
  auto events = events_of(r.body).events;
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().first, "error");
  EXPECT_EQ(boost::json::parse(events.back().second).at("error").at("type").as_string(),
            "upstream_error");
  EXPECT_EQ(r.body.find("message_stop"), std::string::npos);
}

TEST(Failures, UnreachableUpstreamIs502WithJsonError) {
  fixture_options o;
  o.base_url = "http://127.0.0.1:1/v1";  // nothing listens on port 1
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.headers["content-type"], "application/json");
  auto error = boost::json::parse(r.body).at("error");
  EXPECT_EQ(error.at("type").as_string(), "upstream_error");
  EXPECT_EQ(error.at("code").as_string(), "upstream_unavailable");
}

TEST(Failures, FirstByteTimeoutIs504AndClosesTheUpstream) {
  fixture_options o;
  o.upstream_extra = "    timeouts:\n      first_byte: 300ms\n";
  proxy_fixture f(o);
  http_client c(f.port());
  auto start = clock::now();
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"demo","stream":false,"demo":{"ttft_ms":5000}})"));
  auto r = read_response(c, 5s);
  EXPECT_EQ(r.status, 504);
  EXPECT_LT(clock::now() - start, 2s);
  EXPECT_EQ(boost::json::parse(r.body).at("error").at("code").as_string(), "upstream_timeout");
  EXPECT_TRUE(wait_until([&] { return f.engine_stats().cancelled.load() == 1; }, 2s,
                         "the engine to be told"));
}

TEST(Failures, IdleGapTimeoutMidStreamEndsWithAnErrorEvent) {
  fixture_options o;
  o.upstream_extra = "    timeouts:\n      idle: 200ms\n";
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"demo","stream":true,"demo":{"tokens":5,"interval_ms":2000}})"));
  auto r = read_response(c, 5s);
  ASSERT_TRUE(r.complete);
  auto events = events_of(r.body).events;
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(boost::json::parse(events.back().second).at("error").at("code").as_string(),
            "upstream_timeout");
}

TEST(Failures, UpstreamErrorStatusPassesThroughWithItsHeaders) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","demo":{"status":429}})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_TRUE(boost::json::parse(r.body).as_object().contains("error"));
}

// --- Faulty upstreams (issue #6) ----------------------------------------

TEST(Faults, DnsFailureOfANamedUpstreamIs502NamingIt) {
  fixture_options o;
  o.base_url = "http://no-such-host.invalid/v1";  // .invalid never resolves (RFC 6761)
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo"})"));
  auto r = read_response(c, 15s);
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(error_code_of(r), "upstream_unavailable");
  EXPECT_NE(r.body.find("no-such-host.invalid"), std::string::npos) << r.body;
}

TEST(Faults, TlsHandshakeFailureIs502) {
  fixture_options o;
  o.base_url = "https://127.0.0.1:{engine}/v1";  // the engine speaks plain HTTP
  proxy_fixture f(o);
  http_client c(f.port());
  auto start = clock::now();
  c.send(post_json("/v1/chat/completions", R"({"model":"demo"})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 502);
  EXPECT_LT(clock::now() - start, 3s);
  EXPECT_EQ(boost::json::parse(r.body).at("error").at("type").as_string(), "upstream_error");
}

// A plain-TCP upstream that never answers the connect: its listener's
// queue is full, so the kernel drops the proxy's SYN (as a host that is
// down, or a firewall, would). The connect is bounded by the connect
// timeout and ends in a 504.
TEST(Faults, AnUpstreamThatNeverAnswersTheConnectTimesOut) {
  hand_upstream full{[](int) {}};  // never accepts
  full.fill_queue();
  fixture_options o;
  o.base_url = full.base_url();
  o.upstream_extra = "    timeouts:\n      connect: 300ms\n";
  proxy_fixture f(o);
  http_client c(f.port());
  auto start = clock::now();
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true})"));
  auto r = read_response(c, 5s);
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_GE(clock::now() - start, 250ms);
  EXPECT_LT(clock::now() - start, 3s);
  EXPECT_EQ(error_code_of(r), "upstream_timeout");
  auto message = std::string(boost::json::parse(r.body).at("error").at("message").as_string());
  EXPECT_NE(message.find("cannot connect to upstream"), std::string::npos) << message;
  EXPECT_NE(message.find("timeout"), std::string::npos) << message;
}

// An https upstream whose TCP port answers (the kernel completes the
// connection on its backlog) but which never says a word of TLS: the
// handshake is bounded by the connect timeout and ends in a 504.
TEST(Faults, ASilentTlsUpstreamTimesOutItsHandshake) {
  hand_upstream silent{[](int) {}};  // never accepts: connections wait in the backlog
  fixture_options o;
  auto url = silent.base_url();
  o.base_url = "https" + url.substr(4);
  o.upstream_extra = "    timeouts:\n      connect: 300ms\n";
  proxy_fixture f(o);
  http_client c(f.port());
  auto start = clock::now();
  c.send(post_json("/v1/chat/completions", R"({"model":"demo"})"));
  auto r = read_response(c, 5s);
  EXPECT_EQ(r.status, 504);
  EXPECT_GE(clock::now() - start, 250ms);
  EXPECT_LT(clock::now() - start, 3s);
  EXPECT_EQ(error_code_of(r), "upstream_timeout");
  EXPECT_NE(r.body.find("timed out"), std::string::npos) << r.body;
}

TEST(Faults, AOneByteTrickleArrivesWholeAndInOrder) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json(
      "/v1/chat/completions",
      R"({"model":"demo","stream":true,"max_tokens":2,"demo":{"ttft_ms":0,"drip_ms":1}})"));
  auto r = read_response(c, 20s);
  EXPECT_EQ(r.status, 200);
  auto facts = observed(r.body);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(facts.text_by_choice[0], "The quick");
}

TEST(Faults, GarbageInsteadOfEventsIsAFailedStreamNotASuccess) {
  proxy_fixture f;
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions",
                   R"({"model":"demo","stream":true,"demo":{"ttft_ms":0,"garbage":true}})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 200);  // the head was already the upstream's
  EXPECT_TRUE(r.complete) << "the body must still be framed properly";
  EXPECT_NE(r.body.find("upstream_invalid_stream"), std::string::npos) << "the client is told";
  std::string metrics;
  // (The record is written just after the last byte.)
  EXPECT_TRUE(wait_until(
      [&] {
        metrics = http_get(f.admin_port(), "/metrics").body;
        return metrics.find("outcome=\"stream_failed\"} 1") != std::string::npos;
      },
      2s, "the request's record"));
  EXPECT_EQ(metrics.find("outcome=\"success\"} 1"), std::string::npos)
      << "garbage counted as a success";
}

// An upstream that answers one request with fixed bytes, in parts sent 50 ms
// apart, and then ends the connection with a FIN or a reset: framings and
// endings the demo engine never sends. The pause puts the last part and the
// ending into the same read of the proxy, after a read that waited: a proxy
// that took that short read to mean "nothing more until epoll says so" never
// saw the ending (the FIN's or the reset's wakeup had already been used).
class scripted_upstream {
 public:
  enum class ending { fin, reset };
  scripted_upstream(std::vector<std::string> parts, ending end)
      : parts_(std::move(parts)), end_(end) {}
  std::string base_url() const { return server_.base_url(); }

 private:
  void serve_one(int listener) {
    int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") ==
           std::string::npos) {  // the head is enough: the body is small
      auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      request.append(buf, static_cast<std::size_t>(n));
    }
    for (const auto& part : parts_) {
      std::this_thread::sleep_for(50ms);
      ::send(fd, part.data(), part.size(), MSG_NOSIGNAL);
    }
    if (end_ == ending::reset) {
      linger hard{1, 0};  // close with a reset
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    } else {
      ::shutdown(fd, SHUT_WR);
      while (::recv(fd, buf, sizeof buf, 0) > 0) {
      }  // until the proxy closes
    }
    ::close(fd);
  }

  std::vector<std::string> parts_;
  ending end_;
  hand_upstream server_{
      [this](int listener) { serve_one(listener); }};  // (last: starts once the rest is set)
};

// An upstream that keeps its first connection alive after one answer and
// then closes it: while it idles in the proxy's pool (the close is seen
// before the connection is taken again), or after reading the next request
// sent on it (a close the proxy could not have seen: the request is retried
// once, on a new connection). Each connection's answers are counted.
// `idle_then_watch` closes only its sending side while the connection
// idles, as a keep-alive timeout would, and then watches for the proxy's
// close for 5 s; `never_then_watch` watches without closing anything.
class closing_upstream {
 public:
  enum class when { idle, after_next_request, idle_then_watch, never_then_watch };
  explicit closing_upstream(when w) : when_(w) {}
  std::string base_url() const { return server_.base_url(); }
  int answered() const { return answered_.load(); }
  bool first_closed() const { return first_closed_.load(); }
  bool proxy_closed() const { return proxy_closed_.load(); }

 private:
  static bool read_request(int fd) {  // head and Content-Length body
    std::string got;
    char buf[4096];
    for (;;) {
      auto head_end = got.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::string head = got.substr(0, head_end + 2);
        std::transform(head.begin(), head.end(), head.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        auto at = head.find("\r\ncontent-length:");
        auto length = at == std::string::npos ? 0 : std::stoul(head.substr(at + 17));
        if (got.size() >= head_end + 4 + length) return true;
      }
      auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      got.append(buf, static_cast<std::size_t>(n));
    }
  }
  void answer(int fd) {
    const std::string body =
        R"({"id":"x","object":"chat.completion","model":"demo","choices":[{"index":0,"message":)"
        R"({"role":"assistant","content":"ok"},"finish_reason":"stop"}],)"
        R"("usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}})";
    auto response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
    ::send(fd, response.data(), response.size(), MSG_NOSIGNAL);
    ++answered_;
  }
  void serve(int listener) {
    int first = ::accept(listener, nullptr, nullptr);
    if (first < 0) return;
    if (read_request(first)) answer(first);
    if (when_ == when::idle_then_watch || when_ == when::never_then_watch) return watch(first);
    // (Idle: closed a moment after the answer, so that the proxy's last
    // read has drained the socket before the FIN comes.)
    if (when_ == when::idle)
      std::this_thread::sleep_for(50ms);
    else
      read_request(first);
    ::close(first);
    first_closed_ = true;
    int second = ::accept(listener, nullptr, nullptr);
    if (second < 0) return;
    while (read_request(second)) answer(second);
    ::close(second);
  }

  void watch(int fd) {
    if (when_ == when::idle_then_watch) {
      std::this_thread::sleep_for(50ms);
      ::shutdown(fd, SHUT_WR);
      first_closed_ = true;
    }
    pollfd p{fd, POLLIN, 0};
    char byte;
    if (::poll(&p, 1, 5000) == 1 && ::recv(fd, &byte, 1, 0) == 0) proxy_closed_ = true;
    ::close(fd);
  }

  when when_;
  std::atomic<int> answered_{0};
  std::atomic<bool> first_closed_{false};
  std::atomic<bool> proxy_closed_{false};
  hand_upstream server_{
      [this](int listener) { serve(listener); }};  // (last: starts once the rest is set)
};

fixture_options in_front_of(const std::string& base_url) {
  fixture_options o;
  o.base_url = base_url;
  return o;
}

// `idle`: the upstream closes its first connection between the requests.
void two_requests_through(const closing_upstream& upstream, bool idle, int& reused) {
  proxy_fixture f(in_front_of(upstream.base_url()));
  http_client c(f.port());
  for (int i = 0; i < 2; ++i) {
    c.send(post_json("/v1/chat/completions", R"({"model":"demo","messages":[]})"));
    auto r = read_response(c, 5s);
    ASSERT_TRUE(r.complete) << "request " << i;
    EXPECT_EQ(r.status, 200) << "request " << i << ": " << r.body;
    c.clear();
    if (idle && i == 0) {
      ASSERT_TRUE(wait_until([&] { return upstream.first_closed(); }, 2s, "the upstream's close"));
      // Nothing of the proxy's shows that its loop has taken epoll's report
      // of the close (the idle connection has no operation): a moment for it.
      std::this_thread::sleep_for(50ms);
    }
  }
  reused = static_cast<int>(metric(f, "tokengate_upstream_cx_reused_total"));
}

TEST(Faults, AnUpstreamConnectionClosedWhileIdleIsNotTakenAgain) {
  closing_upstream upstream(closing_upstream::when::idle);
  int reused = -1;
  two_requests_through(upstream, true, reused);
  EXPECT_EQ(upstream.answered(), 2);
  EXPECT_EQ(reused, 0)
      << "the close was reported while the connection idled: it must not carry a request";
}

TEST(Faults, AnUpstreamConnectionClosedUnderANewRequestIsRetriedOnce) {
  closing_upstream upstream(closing_upstream::when::after_next_request);
  int reused = -1;
  two_requests_through(upstream, false, reused);
  EXPECT_EQ(upstream.answered(), 2) << "the second request must be answered on a new connection";
  EXPECT_EQ(reused, 1);
}

// One answered request through `f`, whose connection then idles in the pool.
void one_request_pooled(proxy_fixture& f) {
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","messages":[]})"));
  auto r = read_response(c, 5s);
  ASSERT_TRUE(r.complete);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(wait_until([&] { return metric(f, "tokengate_upstream_cx_idle") == 1u; }, 2s,
                         "the connection pooled"));
}

// Whether, with `serve`'s sweep run every 10 ms, no pooled connection is
// left within `bound`.
testing::AssertionResult swept_until_none_idle(proxy_fixture& f, std::chrono::milliseconds bound,
                                               const char* what) {
  return wait_until(
      [&] {
        f.proxy().close_stale_pooled_connections_now();
        return metric(f, "tokengate_upstream_cx_idle") == 0u;
      },
      bound, what);
}

// An engine closes an idle keep-alive connection after its timeout; the
// proxy's side must not wait in CLOSE_WAIT until traffic comes back: the
// once-a-second sweep of `serve` closes it.
TEST(Faults, APooledConnectionItsUpstreamClosedIsClosedWhileItIdles) {
  closing_upstream upstream(closing_upstream::when::idle_then_watch);
  proxy_fixture f(in_front_of(upstream.base_url()));
  one_request_pooled(f);
  ASSERT_TRUE(wait_until([&] { return upstream.first_closed(); }, 2s, "the upstream's close"));
  EXPECT_TRUE(wait_until(
      [&] {
        f.proxy().close_stale_pooled_connections_now();
        return upstream.proxy_closed();
      },
      4s, "the proxy's close of its side"));
  EXPECT_EQ(metric(f, "tokengate_upstream_cx_idle"), 0u);
}

TEST(Faults, APooledConnectionItsUpstreamKeepsOpenStaysPooled) {
  closing_upstream upstream(closing_upstream::when::never_then_watch);
  proxy_fixture f(in_front_of(upstream.base_url()));
  one_request_pooled(f);
  for (int i = 0; i < 20; ++i) f.proxy().close_stale_pooled_connections_now();
  EXPECT_FALSE(upstream.proxy_closed()) << "a live pooled connection was closed";
  EXPECT_EQ(metric(f, "tokengate_upstream_cx_idle"), 1u);
}

// One the demo engine would keep open is closed once it has waited its
// upstream's timeouts.pooled, and the next request takes a new one.
TEST(Faults, APooledConnectionIsClosedOnceItHasWaitedItsLongest) {
  fixture_options o;
  o.upstream_extra = "    timeouts: {pooled: 1s}\n";
  proxy_fixture f(o);
  one_request_pooled(f);
  f.proxy().close_stale_pooled_connections_now();
  EXPECT_EQ(metric(f, "tokengate_upstream_cx_idle"), 1u) << "closed before its time";
  EXPECT_TRUE(swept_until_none_idle(f, 3s, "the pooled connection's close after 1 s"));
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","messages":[]})"));
  auto r = read_response(c, 5s);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(metric(f, "tokengate_upstream_cx_reused_total"), 0u)
      << "a closed connection was taken again";
}

// A reload that keeps the upstream (same name and URL) keeps its pool and
// its connections, but the pool must follow the upstream's new settings.
TEST(Reload, APoolKeptByAReloadTakesItsNewLongestWait) {
  proxy_fixture f;
  one_request_pooled(f);
  f.reload_with_options(
      [](fixture_options& o) { o.upstream_extra = "    timeouts: {pooled: 1s}\n"; });
  EXPECT_TRUE(swept_until_none_idle(
      f, 3s, "the close after the reloaded 1 s (the start-up config's wait is 60 s)"));
}

// A connection pooled, then a reload that changes the fixture's options
// as `change` says: whether the reload itself (no sweep) empties the pool.
testing::AssertionResult reload_closes_the_idle_one(
    proxy_fixture& f, const std::function<void(fixture_options&)>& change, const char* what) {
  one_request_pooled(f);
  f.reload_with_options(change);
  return wait_until([&] { return metric(f, "tokengate_upstream_cx_idle") == 0u; }, 2s, what);
}

TEST(Reload, APoolShrunkByAReloadClosesTheIdleConnectionsOverItsNewSize) {
  proxy_fixture f;
  EXPECT_TRUE(reload_closes_the_idle_one(
      f, [](fixture_options& o) { o.upstream_extra = "    pool_size: 0\n"; },
      "the close at the reload"));
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","messages":[]})"));
  auto r = read_response(c, 5s);
  EXPECT_EQ(r.status, 200) << r.body;
  // Once the request is over, its connection has gone back or closed.
  ASSERT_TRUE(wait_until([&] { return metric(f, "tokengate_downstream_rq_active") == 0u; }, 2s,
                         "the request's end"));
  EXPECT_EQ(metric(f, "tokengate_upstream_cx_idle"), 0u) << "pooled beyond pool_size 0";
}

TEST(Reload, APoolWhoseUpstreamMovedClosesItsIdleConnections) {
  proxy_fixture f;
  // the same engine by another URL: a new pool; the old one is retired
  EXPECT_TRUE(reload_closes_the_idle_one(
      f, [](fixture_options& o) { o.base_url = "http://localhost:{engine}/v1"; },
      "the retired pool's idle connection closed at the reload"));
}

const std::string three_events =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The\"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" "
    "end\"},\"finish_reason\":\"stop\"}]}\n\n"
    "data: [DONE]\n\n";

// One streaming request through a proxy in front of `upstream`.
http_response stream_through(const scripted_upstream& upstream) {
  fixture_options o;
  o.base_url = upstream.base_url();
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true})"));
  return read_response(c, 5s);
}

TEST(Faults, AnUpstreamBodyThatRunsToTheCloseIsRelayedWholeAndChunked) {
  scripted_upstream upstream(
      {"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
       three_events},
      scripted_upstream::ending::fin);
  auto r = stream_through(upstream);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
  EXPECT_EQ(r.body, three_events);
  EXPECT_TRUE(observed(r.body).ended_properly());
}

TEST(Faults, AStatusCodeOfTheUpstreamsOwnPassesThrough) {
  // Codes Beast has no name for (299 here) once went out as "0 <unknown-status>".
  scripted_upstream upstream(
      {"HTTP/1.1 299 Fine Thanks\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
       three_events},
      scripted_upstream::ending::fin);
  auto r = stream_through(upstream);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 299);
  EXPECT_EQ(r.body, three_events);
}

const std::string chunked_sse_head =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
const std::string one_event =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The\"}}]}\n\n";

// `data` framed as one HTTP chunk.
std::string chunk(const std::string& data) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx", data.size());
  return std::string(size) + "\r\n" + data + "\r\n";
}

// A head that comes in three parts (the proxy parses what it has, then
// reads on), with a folded field: relayed as the upstream wrote it, the fold
// blanked into one line.
TEST(Faults, AHeadInPartsWithAFoldedFieldIsRelayedAsOneLine) {
  scripted_upstream upstream(
      {"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Folded: first",
       "\r\n  second\r\nConnection: close\r\nSet-Cookie: a=1\r\n",
       "Set-Cookie: b=2\r\n\r\n" + three_events},
      scripted_upstream::ending::fin);
  auto r = stream_through(upstream);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["x-folded"], "first    second");
  EXPECT_EQ(r.body, three_events);
}

// A 204 ends with its head, for the client too: no framing field and no
// last chunk after it (which a client would read as the start of its next
// answer), and the client's connection stays open for the next request.
TEST(Faults, A204AnswerReachesTheClientWithoutFraming) {
  scripted_upstream upstream({"HTTP/1.1 204 No Content\r\nX-Deleted: yes\r\n\r\n"},
                             scripted_upstream::ending::fin);
  fixture_options o;
  o.base_url = upstream.base_url();
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true})"));
  auto r = read_response(c, 500ms);  // (the test client reads a bodiless answer to its deadline)
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.headers["x-deleted"], "yes");
  EXPECT_EQ(r.headers["transfer-encoding"], "") << c.raw();  // (the test client reads it with [])
  EXPECT_EQ(r.headers.count("content-length"), 0u);
  EXPECT_EQ(c.raw().size(), r.body_offset)
      << "bytes after a 204's head: " << c.raw().substr(r.body_offset);
  EXPECT_FALSE(c.eof()) << "the client's connection was closed";
}

// What an upstream's head must not be: more than 64 KiB, or framed two
// ways at once. The client gets a 502 that says so, not a hang.
TEST(Faults, AnUpstreamHeadTooLongOrFramedTwoWaysIsA502) {
  std::string long_head = "HTTP/1.1 200 OK\r\n";
  while (long_head.size() <= 64 * 1024) long_head += "X-Padding: " + std::string(100, 'p') + "\r\n";
  scripted_upstream too_long({long_head + "\r\n", three_events}, scripted_upstream::ending::fin);
  auto r = stream_through(too_long);
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_EQ(error_code_of(r), "upstream_error");
  EXPECT_NE(r.body.find("header limit"), std::string::npos) << r.body;

  scripted_upstream two_ways(
      {"HTTP/1.1 200 OK\r\nContent-Length: 20\r\nTransfer-Encoding: chunked\r\n\r\n",
       chunk(three_events) + "0\r\n\r\n"},
      scripted_upstream::ending::fin);
  r = stream_through(two_ways);
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_NE(r.body.find("bad Transfer-Encoding"), std::string::npos) << r.body;
}

TEST(Faults, AnUpstreamThatClosesInsideAChunkEndsWithAnErrorEvent) {
  // One whole chunk, then a chunk that promises 0x40 bytes and brings 12.
  scripted_upstream upstream({chunked_sse_head, chunk(one_event) + "40\r\ndata: {\"cho"},
                             scripted_upstream::ending::fin);
  auto r = stream_through(upstream);
  ASSERT_TRUE(r.complete) << "the chunked body must be terminated, not cut";
  EXPECT_TRUE(r.body.starts_with(one_event));
  auto events = events_of(r.body).events;
  ASSERT_EQ(events.size(), 2u) << r.body;
  EXPECT_EQ(boost::json::parse(events.back().second).at("error").at("code").as_string(),
            "upstream_disconnected");
  EXPECT_EQ(r.body.find("[DONE]"), std::string::npos);
}

// The relay takes the framing off in its read buffer (http/body_decoder):
// a size line cut between two reads, an extension, two chunks in one read
// and trailers after the last chunk must all come out as the events alone.
TEST(Faults, ChunkFramingIsUndoneWhateverTheReadsBring) {
  const std::string first = one_event;
  const std::string second =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" "
      "end\"},\"finish_reason\":\"stop\"}]}\n\n";
  const std::string last = "data: [DONE]\n\n";
  auto framed_first = chunk(first);
  auto size_line_end = framed_first.find("\r\n");
  char second_size[16];
  std::snprintf(second_size, sizeof second_size, "%zx", second.size());
  scripted_upstream upstream(
      {chunked_sse_head,
       framed_first.substr(0, size_line_end - 1),  // the size line, cut before its last digit
       framed_first.substr(size_line_end - 1),
       std::string(second_size) + ";source=\"demo; quoted\"\r\n" + second + "\r\n" + chunk(last),
       "0\r\nX-Checksum: abc\r\n\r\n"},
      scripted_upstream::ending::fin);
  auto r = stream_through(upstream);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, first + second + last);
  EXPECT_TRUE(observed(r.body).ended_properly());
}

TEST(Faults, BrokenChunkFramingEndsWithAnErrorEvent) {
  // One whole chunk, then a size line that is not hexadecimal.
  scripted_upstream upstream({chunked_sse_head, chunk(one_event) + "zz\r\ndata: x\n\n\r\n"},
                             scripted_upstream::ending::fin);
  auto r = stream_through(upstream);
  ASSERT_TRUE(r.complete) << "the chunked body must be terminated, not cut";
  auto events = events_of(r.body).events;
  ASSERT_EQ(events.size(), 2u) << r.body;
  EXPECT_TRUE(r.body.starts_with(one_event));
  EXPECT_EQ(boost::json::parse(events.back().second).at("error").at("code").as_string(),
            "upstream_disconnected");
}

TEST(Faults, AResetRightAfterTheLastBytesEndsTheStreamAtOnce) {
  // The reset follows the bytes at once: both reach the proxy together.
  scripted_upstream upstream({chunked_sse_head, chunk(one_event)},
                             scripted_upstream::ending::reset);
  auto start = clock::now();
  auto r = stream_through(upstream);
  ASSERT_TRUE(r.complete) << "the reset must end the stream now, not at the idle timeout";
  EXPECT_LT(clock::now() - start, 2s);
  auto events = events_of(r.body).events;
  ASSERT_EQ(events.size(), 2u) << r.body;
  EXPECT_EQ(boost::json::parse(events.back().second).at("error").at("code").as_string(),
            "upstream_disconnected");
}

}  // namespace
}  // namespace tokengate::test
