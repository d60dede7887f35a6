// Where an upstream's answer begins and ends on a kept-alive connection.
// Interim answers (1xx) are passed over for the final answer, never taken
// for it: taken for it, a 103 Early Hints once reached the client as its
// answer (which then waited for the real one until its timeout) and the
// real answer stayed unread on a pooled connection. Bytes past the end of
// an answer mean the upstream and the proxy disagree on where it ended:
// its connection is not used again.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "support/hand_upstream.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

// An upstream that answers every request of every connection (one
// connection at a time) with `interim`, then a moment later with a final
// JSON answer numbered by the request ("answer-1", "answer-2", …) and
// `past_the_end` right after it. With `together`, all go out in one send.
class interim_upstream {
 public:
  explicit interim_upstream(std::string interim, bool together = false,
                            std::string past_the_end = "")
      : interim_(std::move(interim)), together_(together), past_the_end_(std::move(past_the_end)) {}
  std::string base_url() const { return server_.base_url(); }
  int connections() const { return connections_.load(); }

 private:
  static bool read_request(int fd, std::string& got) {  // head and Content-Length body
    char buf[4096];
    for (;;) {
      auto head_end = got.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        auto at = got.find("\r\nContent-Length: ");
        auto length =
            at == std::string::npos || at > head_end ? 0 : std::stoul(got.substr(at + 18));
        if (got.size() >= head_end + 4 + length) {
          got.erase(0, head_end + 4 + length);
          return true;
        }
      }
      auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      got.append(buf, static_cast<std::size_t>(n));
    }
  }
  void send_all(int fd, const std::string& bytes) {
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  void serve(int listener) {
    for (;;) {
      int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) return;
      ++connections_;
      std::string got;
      while (read_request(fd, got)) {
        const std::string body = R"({"id":"answer-)" + std::to_string(++answered_) +
                                 R"(","object":"chat.completion","model":"demo","choices":[]})";
        const std::string answer =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body + past_the_end_;
        if (together_) {
          send_all(fd, interim_ + answer);
          continue;
        }
        send_all(fd, interim_);
        std::this_thread::sleep_for(
            20ms);  // (so that the proxy reads the interim answers on their own)
        send_all(fd, answer);
      }
      ::close(fd);
    }
  }

  std::string interim_;
  bool together_;
  std::string past_the_end_;
  std::atomic<int> connections_{0};
  int answered_ = 0;  // (the serving thread's alone)
  hand_upstream server_{
      [this](int listener) { serve(listener); }};  // (last: starts once the rest is set)
};

fixture_options through(const interim_upstream& upstream) {
  fixture_options o;
  o.base_url = upstream.base_url();
  o.upstream_extra = "    pool_size: 1\n";
  return o;
}

const std::string early_hints_and_continue =
    "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
    "HTTP/1.1 100 Continue\r\n\r\n";

// Each request on one kept-alive client connection gets its own final
// answer, over `connections` upstream connections (1: the pooled one).
void expect_own_answers(const interim_upstream& upstream, int connections = 1) {
  proxy_fixture f(through(upstream));
  http_client c(f.port());
  for (int i = 1; i <= 3; ++i) {
    c.send(post_json("/v1/chat/completions", R"({"model":"demo","messages":[]})"));
    auto r = read_response(c, 5s);
    ASSERT_TRUE(r.complete) << "request " << i << ": " << c.raw();
    EXPECT_EQ(r.status, 200) << "request " << i;
    EXPECT_NE(r.body.find("\"answer-" + std::to_string(i) + "\""), std::string::npos)
        << "request " << i << " must get its own answer: " << r.body;
    c.clear();
  }
  EXPECT_EQ(upstream.connections(), connections)
      << (connections == 1 ? "the upstream connection must be taken again after each answer"
                           : "a connection with bytes past an answer must not be taken again");
}

TEST(InterimAnswers, ArePassedOverForTheFinalAnswer) {
  interim_upstream upstream(early_hints_and_continue);
  expect_own_answers(upstream);
}

TEST(InterimAnswers, ArePassedOverWhenTheyComeInOneReadWithTheAnswer) {
  interim_upstream upstream(early_hints_and_continue, true);
  expect_own_answers(upstream);
}

// A whole JSON answer is held to its end (one cut mid-body is asked
// again); a body of another kind is not: Ollama's NDJSON is a stream, and
// its first line reaches the client before the upstream sends the next.
TEST(NdjsonStreams, ArePassedOnAsTheyComeNotHeld) {
  hand_upstream upstream([](int listener) {
    int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    char buf[4096];
    ::recv(fd, buf, sizeof buf, 0);
    auto send = [&](const std::string& bytes) {
      ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    };
    const std::string first = R"({"message":{"content":"Hi"},"done":false})"
                              "\n";
    const std::string last = R"({"message":{"content":"!"},"done":true})"
                             "\n";
    send(
        "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
        "Transfer-Encoding: chunked\r\n\r\n");
    auto chunk = [](const std::string& line) {
      char size[16];
      std::snprintf(size, sizeof size, "%zx\r\n", line.size());
      return size + line + "\r\n";
    };
    send(chunk(first));
    std::this_thread::sleep_for(600ms);
    send(chunk(last) + "0\r\n\r\n");
    std::this_thread::sleep_for(100ms);
    ::close(fd);
  });
  fixture_options o;
  o.base_url = upstream.base_url();
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","messages":[]})"));
  const auto start = std::chrono::steady_clock::now();
  while (c.raw().find("\"Hi\"") == std::string::npos && c.read_some(1s)) {
  }
  EXPECT_NE(c.raw().find("\"Hi\""), std::string::npos) << c.raw();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 400ms)
      << "the first line waited for the last";
  auto r = read_response(c, 5s);
  EXPECT_TRUE(r.complete);
}

TEST(BytesPastTheAnswer, CloseTheUpstreamConnection) {
  // A second answer smuggled after the first, in the same read: it must
  // not answer the next request, nor be dropped unseen with the connection
  // kept.
  const std::string smuggled =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n"
      R"({"id":"forged"})"
      "\n";
  interim_upstream upstream("", true, smuggled);
  expect_own_answers(upstream, 3);
}

// A 502 with the OpenAI-style error body, the client's connection kept.
void expect_refused(const std::string& interim) {
  interim_upstream upstream(interim);
  proxy_fixture f(through(upstream));
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","messages":[]})"));
  auto r = read_response(c, 5s);
  ASSERT_TRUE(r.complete) << c.raw();
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(r.body.find("sent a status the proxy cannot relay"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"type\":\"upstream_error\""), std::string::npos) << r.body;
}

std::string interim_answers(std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i)
    out += "HTTP/1.1 103 Early Hints\r\nLink: </a.js>; rel=preload\r\n\r\n";
  return out;
}

TEST(InterimAnswers, EightArePassedOverAndANinthIsRefused) {
  {
    interim_upstream upstream(interim_answers(8));
    proxy_fixture f(through(upstream));
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions", R"({"model":"demo","messages":[]})"));
    auto r = read_response(c, 5s);
    ASSERT_TRUE(r.complete) << c.raw();
    EXPECT_EQ(r.status, 200) << r.body;
  }
  expect_refused(interim_answers(9));
}

TEST(InterimAnswers, ASwitchToAnotherProtocolIsRefused) {
  expect_refused(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n");
}

}  // namespace
}  // namespace tokengate::test
