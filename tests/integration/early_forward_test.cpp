// Long bodies forwarded while they arrive (server/early_forward.hpp): the
// upstream receives the bytes before the client has sent its last one, but
// never a complete request that the whole body's scan would not have sent.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <memory>
#include <mutex>
#include <thread>

#include "support/hand_upstream.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

namespace json = boost::json;

// A model renamed with a limit clamped (and a default), and an alias whose
// limit is refused above its ceiling.
const std::string early_routes =
    "routes:\n"
    "  - {name: exact, models: [gpt-4o-mini], targets: [{upstream: demo, model: real-mini}],\n"
    "     max_output_tokens: {default: 5, ceiling: 8, mode: clamp}}\n"
    "  - {name: alias, models: [fast], targets: [{upstream: demo, model: demo-fast}],\n"
    "     max_output_tokens: {ceiling: 8, mode: reject}}\n";

fixture_options with_early_routes() {
  fixture_options o;
  o.top_extra = early_routes;
  return o;
}

// A conversation of about `bytes` bytes, as JSON members: "messages":[…]
// (after the demo engine's option of no modelled prefill, which would take
// most of a second on these lengths).
std::string messages(std::size_t bytes, const std::string& word = "word") {
  std::string text;
  for (int i = 0; text.size() < bytes; ++i) text += word + " " + std::to_string(i) + " ";
  return R"("demo":{"ttft_ms":0},"messages":[{"role":"user","content":")" + text + R"("}])";
}

http_response post(proxy_fixture& f, const std::string& body) {
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", body));
  return read_response(c);
}

// An upstream that records every byte it receives on its latest
// connection and, once a whole request is in (head and Content-Length),
// answers it with a small JSON body; or notes that the proxy closed the
// connection before the request was whole.
class recording_upstream {
 public:
  std::string base_url() const { return server_.base_url(); }
  std::size_t received() const { return received_.load(); }
  bool complete() const { return complete_.load(); }
  bool closed_incomplete() const { return closed_incomplete_.load(); }
  std::string bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
  }
  // The body of the request received, once complete.
  std::string body() const {
    auto all = bytes();
    return all.substr(all.find("\r\n\r\n") + 4);
  }

 private:
  void serve(int listener) {
    for (;;) {
      int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) return;  // the listener was shut down
      {
        std::lock_guard lock(mutex_);
        bytes_.clear();
      }
      received_ = 0;
      complete_ = false;
      closed_incomplete_ = false;
      serve_one(fd);
      ::close(fd);
    }
  }

  void serve_one(int fd) {
    char buf[65536];
    for (;;) {
      auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_incomplete_ = true;
        return;
      }
      std::lock_guard lock(mutex_);
      bytes_.append(buf, static_cast<std::size_t>(n));
      received_ = bytes_.size();
      auto head_end = bytes_.find("\r\n\r\n");
      auto length_at = bytes_.find("Content-Length: ");
      if (head_end == std::string::npos || length_at == std::string::npos) continue;
      auto length = std::stoull(bytes_.substr(length_at + 16));
      if (bytes_.size() < head_end + 4 + length) continue;
      complete_ = true;
      static const std::string answer =
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
          "11\r\n\r\n{\"ok\":true}";
      ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
      break;
    }
    ::shutdown(fd, SHUT_WR);
    while (::recv(fd, buf, sizeof buf, 0) > 0) {
    }
  }

  mutable std::mutex mutex_;
  std::string bytes_;
  std::atomic<std::size_t> received_{0};
  std::atomic<bool> complete_{false};
  std::atomic<bool> closed_incomplete_{false};
  hand_upstream server_{
      [this](int listener) { serve(listener); }};  // (last: starts once the rest is set)
};

// The upstream has most of the body while the client still holds back its
// end, never the body's last byte before the client sent it, and then the
// whole body with the policy's two changes.
TEST(EarlyForward, TheUpstreamReceivesALongBodyBeforeItsEndAndNeverTheLastByteEarly) {
  recording_upstream upstream;
  auto o = with_early_routes();
  o.base_url = upstream.base_url();
  proxy_fixture f(o);
  const auto body = R"({"model":"gpt-4o-mini","max_tokens":50,)" + messages(400'000) + "}";
  const auto request = post_json("/v1/chat/completions", body);
  const std::size_t held_back = 50'000;
  http_client c(f.port());
  c.send(request.substr(0, request.size() - held_back));
  ASSERT_TRUE(wait_until([&] { return upstream.received() > 300'000; }, 5s,
                         "the upstream receives the body's start"));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(upstream.complete())
      << "a request completed upstream before the client sent its end";
  EXPECT_LT(upstream.received(), request.size() - held_back + 1000)
      << "more arrived upstream than the client sent";

  c.send(request.substr(request.size() - held_back));
  auto r = read_response(c);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "{\"ok\":true}");
  auto expected = body;
  expected.replace(expected.find("gpt-4o-mini"), 11, "real-mini");
  expected.replace(expected.find("\"max_tokens\":50"), 15, "\"max_tokens\":8");
  auto received = upstream.body();
  EXPECT_EQ(received.size(), expected.size());
  EXPECT_TRUE(received == expected)
      << "the upstream's bytes differ from the client's around the two changes";
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_forwarded_early_total"), 1u);
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_early_abandoned_total"), 0u);
}

// The first members said "no limit" (the default of 5 goes in); a
// max_tokens after the messages says 50, clamped to 8. The connection that
// carried the first guess is closed before its last byte: the engine
// completes one request only, the right one.
TEST(EarlyForward, ALimitAfterTheMessagesReplacesTheEarlyDecision) {
  proxy_fixture f(with_early_routes());
  auto r = post(
      f, R"({"model":"gpt-4o-mini","stream":false,)" + messages(300'000) + R"(,"max_tokens":50})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(f.engine_stats().requests.load(), 1u);
  auto sent = json::parse(f.engine_last_request().at("body").as_string()).as_object();
  EXPECT_EQ(sent.at("max_tokens").as_int64(), 8);
  EXPECT_EQ(sent.at("model").as_string(), "real-mini");
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_forwarded_early_total"), 1u);
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_early_abandoned_total"), 1u);
}

// Duplicate keys: parsers disagree on which one counts, so a policy member
// named twice is refused. A second `model` after the messages: the body
// went early on the first one's route, and never completes there.
TEST(EarlyForward, ASecondModelAfterTheMessagesIsRefusedAndNeverCompletesUpstream) {
  proxy_fixture f(with_early_routes());
  auto r = post(
      f, R"({"model":"gpt-4o-mini","max_tokens":2,)" + messages(300'000) + R"(,"model":"fast"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(error_code_of(r), "duplicate_member");
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_forwarded_early_total"), 1u);
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_early_abandoned_total"), 1u);
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
}

// What the whole body refuses never completes upstream, however much of it
// went early: a limit over the ceiling in reject mode, and JSON that breaks
// after the messages.
TEST(EarlyForward, AWholeBodyThePolicyRefusesNeverCompletesUpstream) {
  proxy_fixture f(with_early_routes());
  auto over =
      post(f, R"({"model":"fast","stream":true,)" + messages(300'000) + R"(,"max_tokens":100})");
  EXPECT_EQ(over.status, 400);
  EXPECT_EQ(error_code_of(over), "max_tokens_exceeded");
  auto broken =
      post(f, R"({"model":"gpt-4o-mini","max_tokens":2,)" + messages(300'000) + R"(,"x":})");
  EXPECT_EQ(broken.status, 400);
  EXPECT_EQ(error_code_of(broken), "invalid_json");
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_forwarded_early_total"), 2u);
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_early_abandoned_total"), 2u);
  EXPECT_EQ(post(f, R"({"model":"gpt-4o-mini","max_tokens":2,)" + messages(300'000) + "}").status,
            200);
  EXPECT_EQ(f.engine_stats().requests.load(), 1u);
}

// A client that goes away mid-body: the upstream had its start and sees
// its connection closed before the request was whole; the next request
// goes through.
TEST(EarlyForward, AClientGoneMidBodyLeavesNothingUpstream) {
  recording_upstream upstream;
  auto o = with_early_routes();
  o.base_url = upstream.base_url();
  proxy_fixture f(o);
  auto request =
      post_json("/v1/chat/completions", R"({"model":"gpt-4o-mini",)" + messages(400'000) + "}");
  {
    http_client c(f.port());
    c.send(request.substr(0, request.size() / 2));
    ASSERT_TRUE(wait_until([&] { return upstream.received() > 100'000; }, 5s,
                           "the upstream receives the body's start"));
    c.reset();
  }
  ASSERT_TRUE(wait_until([&] { return upstream.closed_incomplete(); }, 5s,
                         "the upstream connection to be closed"));
  EXPECT_FALSE(upstream.complete());
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_forwarded_early_total"), 0u);
  http_client c(f.port());
  c.send(request);
  auto r = read_response(c);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(upstream.complete());
}

// Without routes the body goes early too (only its JSON is checked); with
// `messages` first (the OpenAI Python SDK's order) the first members do
// not decide, and the body is read whole first.
TEST(EarlyForward, WithoutRoutesEveryLongBodyGoesEarlyWithRoutesOnlyADecidedOne) {
  {
    proxy_fixture f;
    const auto body = "{" + messages(200'000) + R"(,"model":"demo","max_tokens":2})";
    ASSERT_EQ(post(f, body).status, 200);
    EXPECT_TRUE(f.engine_last_request().at("body").as_string() == body);
    EXPECT_EQ(metric(f, "tokengate_upstream_rq_forwarded_early_total"), 1u);
  }
  proxy_fixture f(with_early_routes());
  ASSERT_EQ(post(f, "{" + messages(200'000) + R"(,"model":"gpt-4o-mini","max_tokens":2})").status,
            200);
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_forwarded_early_total"), 0u);
  EXPECT_EQ(json::parse(f.engine_last_request().at("body").as_string()).at("model").as_string(),
            "real-mini");
}

// Long bodies one after another on one connection, each read into a
// buffer a body before it left (server/body_pool.hpp): shorter, longer,
// forwarded early or (the last, under 64 KiB) read whole first; each
// arrives upstream as the client sent it.
TEST(EarlyForward, LongBodiesOneAfterAnotherInOneConnectionEachArriveAsSent) {
  proxy_fixture f;
  http_client c(f.port());
  const std::pair<std::size_t, std::string> bodies[] = {
      {300'000, "alpha"}, {100'000, "beta"}, {250'000, "gamma"}, {40'000, "delta"}};
  for (const auto& [bytes, word] : bodies) {
    const auto body = "{" + messages(bytes, word) + R"(,"model":"demo","max_tokens":2})";
    c.send(post_json("/v1/chat/completions", body));
    auto answer = read_response(c);
    ASSERT_EQ(answer.status, 200) << word;
    c.consume(answer.body_offset + answer.body.size());
    EXPECT_TRUE(f.engine_last_request().at("body").as_string() == body) << word;
  }
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_forwarded_early_total"), 3u);
  // Each body goes back as its request ends (just after the answer is
  // written): one read into a buffer at least as long as the longest
  // stays kept, at most all four.
  const auto kept = [&] { return metric(f, "tokengate_request_body_buffers_kept_bytes"); };
  EXPECT_TRUE(
      wait_until([&] { return kept() >= 300'000u; }, 5s, "the last body's buffer to be kept"));
  EXPECT_LE(kept(), 2'000'000u);
}

// A server stopped while a long body is half read: the connection is
// closed, and the body's buffer, handed back as the session's frame goes,
// finds its pool still there (under the sanitizers, a pool gone first is
// a use after free or a leak).
TEST(EarlyForward, AServerStoppedWithALongBodyHalfReadClosesItsConnection) {
  std::unique_ptr<http_client> c;  // (outlives the proxy)
  {
    proxy_fixture f;
    const auto body = "{" + messages(300'000) + R"(,"model":"demo","max_tokens":2})";
    // One connection, so one worker and its pool, for both requests.
    c = std::make_unique<http_client>(f.port());
    c->send(post_json("/v1/chat/completions", body));
    auto answer = read_response(*c);
    ASSERT_EQ(answer.status, 200);
    c->consume(answer.body_offset + answer.body.size());
    const auto kept = [&] { return metric(f, "tokengate_request_body_buffers_kept_bytes"); };
    ASSERT_TRUE(
        wait_until([&] { return kept() >= 300'000u; }, 5s, "the first body's buffer to be kept"));
    const auto request = post_json("/v1/chat/completions", body);
    c->send(request.substr(0, request.size() / 2));
    ASSERT_TRUE(
        wait_until([&] { return kept() == 0; }, 5s, "the second body to take the kept buffer"));
  }  // (the drain waits for it until its deadline, then stops the workers)
  while (c->read_some(2s)) {
  }
  EXPECT_TRUE(c->eof()) << "the proxy closed the connection of the half-read request";
}

// The operator's switch: limits.forward_early_bytes: 0 reads every body
// whole first; a higher threshold leaves shorter bodies alone.
TEST(EarlyForward, TheThresholdIsTheOperatorsToSet) {
  const auto body = R"({"model":"gpt-4o-mini","max_tokens":2,)" + messages(200'000) + "}";
  for (std::string threshold : {"0", "300000"}) {
    auto o = with_early_routes();
    o.top_extra += "limits:\n  forward_early_bytes: " + threshold + "\n";
    proxy_fixture f(o);
    ASSERT_EQ(post(f, body).status, 200);
    EXPECT_EQ(metric(f, "tokengate_upstream_rq_forwarded_early_total"), 0u) << threshold;
  }
  auto o = with_early_routes();
  o.top_extra += "limits:\n  forward_early_bytes: 100000\n";
  proxy_fixture f(o);
  ASSERT_EQ(post(f, body).status, 200);
  EXPECT_EQ(metric(f, "tokengate_upstream_rq_forwarded_early_total"), 1u);
}

}  // namespace
}  // namespace tokengate::test
