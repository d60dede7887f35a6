// TLS in (a listener with a certificate made by openssl at test time) and
// TLS out (an HTTPS upstream, verified or refused).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/hand_upstream.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

namespace fs = std::filesystem;

// Writes a self-signed certificate for localhost / 127.0.0.1 (or for the
// names given) with the given common name to cert / key.
void make_certificate(const fs::path& cert, const fs::path& key, const std::string& common_name,
                      const std::string& names = "DNS:localhost,IP:127.0.0.1") {
  auto cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" + common_name +
             " -addext subjectAltName=" + names + " -keyout " + key.string() + " -out " +
             cert.string() + " 2>/dev/null";
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("openssl could not make a certificate");
}

struct temp_dir {
  fs::path path;
  explicit temp_dir(const std::string& name)
      : path(fs::temp_directory_path() / ("tokengate-" + name + "-" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
};

// The certificate most tests use, made once per run.
struct test_certificate {
  temp_dir dir{"tls"};
  fs::path cert = dir.path / "cert.pem", key = dir.path / "key.pem";
  test_certificate() { make_certificate(cert, key, "localhost"); }
};

const test_certificate& certificate() {
  static test_certificate c;
  return c;
}

std::string tls_listener_yaml() {
  return "    tls:\n      cert_file: " + certificate().cert.string() +
         "\n      key_file: " + certificate().key.string() + "\n";
}

// A fixture whose listener speaks TLS with the test certificate.
fixture_options tls_listener() {
  fixture_options o;
  o.listener_extra = tls_listener_yaml();
  return o;
}

// `o` pointed at a TLS upstream (a TLS listener's fixture in front of its
// demo engine) by `host`, trusting `ca` as its upstream_extra's first line.
fixture_options through_tls(fixture_options o, const proxy_fixture& https_upstream,
                            const std::string& host = "localhost",
                            const fs::path& ca = certificate().cert) {
  o.base_url = "https://" + host + ":" + std::to_string(https_upstream.port()) + "/v1";
  o.upstream_extra = "    ca_file: " + ca.string() + "\n" + o.upstream_extra;
  return o;
}

// `count` small streams through `f`, one connection each, read to [DONE].
void stream_one_by_one(const proxy_fixture& f, int count) {
  for (int i = 1; i <= count; ++i) {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":3})"));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete) << "request " << i;
    EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos) << "request " << i;
  }
}

struct client_context {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  explicit client_context(const fs::path& ca) {
    SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
  ~client_context() { SSL_CTX_free(ctx); }
};

TEST(Tls, ListenerServesAStreamOverTls) {
  proxy_fixture f(tls_listener());
  client_context tls(certificate().cert);
  http_client c(f.port(), tls.ctx);
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":3})"));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"content\":\" brown\""), std::string::npos);
  EXPECT_NE(r.body.find("[DONE]"), std::string::npos);
}

TEST(Tls, KeepAliveSurvivesTheClientWatcher) {
  // Each exchange cancels a read pending under TLS when it ends; the
  // connection must carry the next request all the same.
  proxy_fixture f(tls_listener());
  client_context tls(certificate().cert);
  http_client c(f.port(), tls.ctx);
  for (int i = 1; i <= 3; ++i) {
    c.send(post_json("/v1/chat/completions",
                     R"({"model":"demo","stream":true,"max_tokens":)" + std::to_string(i) + "}"));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete) << "request " << i;
    EXPECT_NE(r.body.find("[DONE]"), std::string::npos);
    c.clear();  // the whole response was read
  }
  auto metrics = http_get(f.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("tokengate_downstream_cx_total 1\n"), std::string::npos);
}

// Over TLS too, a client still sending a body over the limit reads the
// 413 rather than a reset (any_stream::lingering_close).
TEST(Tls, AClientStillSendingAnOversizedBodyReadsItsAnswer) {
  proxy_fixture f(tls_listener());
  client_context tls(certificate().cert);
  http_client c(f.port(), tls.ctx);
  constexpr std::size_t body = 24 << 20;  // three times the default limit of 8 MiB
  std::signal(
      SIGPIPE,
      SIG_IGN);  // SSL_write on a reset connection: an error, not the end of the test binary
  c.send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body) + "\r\n\r\n");
  EXPECT_NO_THROW(c.send(std::string(body, 'x')))
      << "the proxy stopped reading and reset the connection";
  auto r = read_response(c, std::chrono::seconds(5));
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("request_too_large"), std::string::npos) << r.body;
}

TEST(Tls, ListenerRejectsPlainHttp) {
  proxy_fixture f(tls_listener());
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo"})"));
  auto r = read_response(c, 3s);
  EXPECT_EQ(r.status, 0) << "no HTTP answer on a TLS port";
  EXPECT_TRUE(c.eof());
}

// A client that opens a connection to a TLS listener and never finishes
// its handshake is closed after limits.tls_handshake_timeout, on a clock of
// its own: here far shorter than head_timeout, so a close within a few
// seconds is that bound's. A client that did finish then has the whole
// head_timeout for its request.
TEST(Tls, AHandshakeHasItsOwnTimeoutAndTheHeadItsOwn) {
  auto o = tls_listener();
  // (1 s: long enough for a real handshake under the sanitizers' builds.)
  o.top_extra = "limits:\n  tls_handshake_timeout: 1s\n  head_timeout: 10s\n";
  proxy_fixture f(o);

  auto started = clock::now();
  http_client stalled(f.port());  // (plain TCP: no ClientHello ever comes)
  auto r = read_response(stalled, 8s);
  auto waited = clock::now() - started;
  EXPECT_TRUE(stalled.eof()) << "the proxy closes the connection (not the wait's end here)";
  EXPECT_EQ(r.status, 0);
  EXPECT_GE(waited, 900ms);
  EXPECT_LT(waited, 5s);

  client_context tls(certificate().cert);
  http_client c(f.port(), tls.ctx);     // (handshakes)
  std::this_thread::sleep_for(1500ms);  // past the handshake's bound, well within the head's
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":2})"));
  auto served = read_response(c);
  ASSERT_TRUE(served.complete);
  EXPECT_EQ(served.status, 200);
}

TEST(Tls, Tls10And11AreRefused) {
  proxy_fixture f(tls_listener());
  for (int version : {TLS1_VERSION, TLS1_1_VERSION}) {
    client_context old(certificate().cert);
    SSL_CTX_set_security_level(old.ctx, 0);  // let this client offer what OpenSSL 3 would not
    SSL_CTX_set_min_proto_version(old.ctx, version);
    SSL_CTX_set_max_proto_version(old.ctx, version);
    EXPECT_THROW(http_client(f.port(), old.ctx), std::runtime_error)
        << "version " << std::hex << version;
  }
  // The same client allowed TLS 1.2 gets through: the refusal was the server's.
  client_context modern(certificate().cert);
  SSL_CTX_set_security_level(modern.ctx, 0);
  SSL_CTX_set_max_proto_version(modern.ctx, TLS1_2_VERSION);
  http_client c(f.port(), modern.ctx);
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","max_tokens":1})"));
  EXPECT_EQ(read_response(c).status, 200);
}

TEST(Tls, UntrustedHttpsUpstreamIsRefused) {
  proxy_fixture https_upstream(tls_listener());  // a TLS endpoint in front of a demo engine

  fixture_options o;
  o.base_url = "https://localhost:" + std::to_string(https_upstream.port()) + "/v1";
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true})"));
  auto r = read_response(c);
  EXPECT_EQ(r.status, 502);
  auto message = std::string(boost::json::parse(r.body).at("error").at("message").as_string());
  EXPECT_NE(message.find("TLS handshake"), std::string::npos) << message;
  EXPECT_EQ(https_upstream.engine_stats().requests.load(), 0u);
}

TEST(Tls, HttpsUpstreamTrustedThroughCaFileWorks) {
  proxy_fixture https_upstream(tls_listener());  // a TLS endpoint in front of a demo engine

  proxy_fixture f(through_tls({}, https_upstream));
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":2})"));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"content\":\" quick\""), std::string::npos);
  EXPECT_EQ(https_upstream.engine_stats().requests.load(), 1u);
}

// The upstream's certificate must name the host of the URL: by name, or by
// address for a URL with an address in it.
TEST(Tls, AnUpstreamCertificateMustNameTheUrlsHost) {
  temp_dir dir("names");
  auto elsewhere_cert = dir.path / "cert.pem", elsewhere_key = dir.path / "key.pem";
  make_certificate(elsewhere_cert, elsewhere_key, "localhost", "DNS:elsewhere.example,IP:10.9.8.7");
  fixture_options elsewhere;
  elsewhere.listener_extra = "    tls:\n      cert_file: " + elsewhere_cert.string() +
                             "\n      key_file: " + elsewhere_key.string() + "\n";
  proxy_fixture upstream_named_elsewhere(elsewhere);
  proxy_fixture upstream_named_here(tls_listener());  // localhost and 127.0.0.1

  struct attempt {
    const proxy_fixture& upstream;
    fs::path trusted;
    std::string host;
    unsigned status;
  };
  const attempt attempts[] = {
      {upstream_named_here, certificate().cert, "127.0.0.1",
       200},  // the address, in the certificate
      {upstream_named_elsewhere, elsewhere_cert, "localhost",
       502},  // a trusted certificate, another name
      {upstream_named_elsewhere, elsewhere_cert, "127.0.0.1",
       502},  // … and another address (its CN is no name)
  };
  for (const auto& a : attempts) {
    auto o = through_tls({}, a.upstream, a.host, a.trusted);
    proxy_fixture f(o);
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":2})"));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete) << o.base_url;
    EXPECT_EQ(r.status, a.status) << o.base_url << ": " << r.body;
    if (a.status == 502) {
      EXPECT_NE(r.body.find("certificate verify failed"), std::string::npos) << r.body;
    }
  }
  EXPECT_EQ(upstream_named_elsewhere.engine_stats().requests.load(), 0u);
  EXPECT_EQ(upstream_named_here.engine_stats().requests.load(), 1u);
}

// An upstream that takes the connection but never answers the handshake
// is a timeout (504) within timeouts.connect, which bounds the handshake
// too, not a hung request.
TEST(Tls, AnUpstreamThatNeverAnswersTheHandshakeIsATimeout) {
  hand_upstream silent(
      [](int) {});  // listening, never accepting: the kernel completes the TCP handshake
  fixture_options o;
  o.base_url = "https://127.0.0.1:" + std::to_string(silent.port()) + "/v1";
  o.upstream_extra = "    timeouts: {connect: 300ms}\n";
  proxy_fixture f(o);
  http_client c(f.port());
  auto started = clock::now();
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":2})"));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 504) << r.body;
  auto error = boost::json::parse(r.body).at("error");
  EXPECT_EQ(error.at("code").as_string(), "upstream_timeout");
  EXPECT_NE(std::string(error.at("message").as_string()).find("TLS handshake"), std::string::npos)
      << r.body;
  EXPECT_LT(clock::now() - started, 3s);
}

// A long body over TLS on both sides, forwarded while it arrives (TLS
// reads and writes in pieces of the body): it reaches the engine byte for
// byte, through a TLS proxy in front of it.
TEST(Tls, ALongBodyGoesEarlyThroughTlsOnBothSides) {
  proxy_fixture https_upstream(tls_listener());
  proxy_fixture f(through_tls(tls_listener(), https_upstream));
  std::string text;
  for (int i = 0; text.size() < 1'500'000; ++i) text += "word " + std::to_string(i) + " ";
  // (No modelled prefill: the demo engine would take seconds on 1.5 MB.)
  const auto body =
      R"({"model":"demo","max_tokens":2,"demo":{"ttft_ms":0},"messages":[{"role":"user","content":")" +
      text + R"("}]})";
  client_context tls(certificate().cert);
  http_client c(f.port(), tls.ctx);
  c.send(post_json("/v1/chat/completions", body));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(https_upstream.engine_stats().requests.load(), 1u);
  EXPECT_TRUE(https_upstream.engine_last_request().at("body").as_string() == body);
  auto metrics = http_get(f.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("tokengate_upstream_rq_forwarded_early_total 1\n"), std::string::npos);
}

// Replaces a file the way cert-manager and certbot do: write aside, rename over.
void replace_file(const fs::path& from, const fs::path& to) {
  fs::copy_file(from, to.string() + ".new", fs::copy_options::overwrite_existing);
  fs::rename(to.string() + ".new", to);
}

TEST(Tls, CertificateRotatesUnderLoadWithNoFailedRequest) {
  temp_dir dir("rotate");
  auto cert = dir.path / "cert.pem", key = dir.path / "key.pem";
  make_certificate(cert, key, "first");
  make_certificate(dir.path / "second-cert.pem", dir.path / "second-key.pem", "second");
  {  // the clients trust both, as they would trust one CA that signed both
    std::ofstream bundle(dir.path / "trust.pem");
    bundle << std::ifstream(cert).rdbuf() << std::ifstream(dir.path / "second-cert.pem").rdbuf();
  }
  fixture_options o;
  o.listener_extra =
      "    tls:\n      cert_file: " + cert.string() + "\n      key_file: " + key.string() + "\n";
  proxy_fixture f(o);
  client_context tls(dir.path / "trust.pem");

  // A long stream that starts on the old certificate and must finish after
  // the rotation (200 tokens/s: about a second).
  http_client long_lived(f.port(), tls.ctx);
  EXPECT_EQ(long_lived.peer_common_name(), "first");
  long_lived.send(
      post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":200})"));

  // Meanwhile, four clients open new connections as fast as they can.
  std::atomic<bool> stop{false}, rotated{false};
  std::atomic<int> ok{0}, failed{0}, first_after_rotation{0}, second_seen{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&] {
      // A client context per thread: OpenSSL's client side races on a
      // shared one's session data (ThreadSanitizer, inside libcrypto).
      client_context own(dir.path / "trust.pem");
      while (!stop) {
        bool after =
            rotated;  // read before connecting: a later handshake must see the new certificate
        try {
          http_client c(f.port(), own.ctx);
          auto name = c.peer_common_name();
          if (after && name == "first") ++first_after_rotation;
          if (name == "second") ++second_seen;
          c.send(post_json("/v1/chat/completions",
                           R"({"model":"demo","stream":true,"max_tokens":4})"));
          auto r = read_response(c);
          if (r.complete && r.status == 200 && r.body.find("[DONE]") != std::string::npos)
            ++ok;
          else
            ++failed;
        } catch (const std::exception&) {
          ++failed;
        }
      }
    });
  // Requests served on each certificate before the next step.
  auto served_more = [&](int more, const char* what) {
    int from = ok.load();
    return wait_until([&] { return ok.load() >= from + more || failed.load() > 0; }, 10s, what);
  };
  EXPECT_TRUE(served_more(5, "requests on the first certificate"));
  replace_file(dir.path / "second-cert.pem", cert);
  replace_file(dir.path / "second-key.pem", key);
  EXPECT_EQ(f.proxy().reload_certificates(false), 0u);
  rotated = true;
  EXPECT_TRUE(served_more(5, "requests on the second certificate"));

  // A broken pair (the key does not match) is refused; the good one stays.
  make_certificate(dir.path / "third-cert.pem", dir.path / "third-key.pem", "third");
  replace_file(dir.path / "third-cert.pem", cert);
  EXPECT_EQ(f.proxy().reload_certificates(true), 1u);
  EXPECT_EQ(f.proxy().reload_certificates(true), 0u)
      << "the same broken files are not retried every second";
  EXPECT_TRUE(served_more(5, "requests after the broken pair was refused"));
  stop = true;
  for (auto& t : clients) t.join();

  EXPECT_EQ(failed, 0);
  EXPECT_GT(ok, 20);
  EXPECT_GT(second_seen, 0);
  EXPECT_EQ(first_after_rotation, 0);
  auto r = read_response(long_lived);
  ASSERT_TRUE(r.complete) << "the stream begun before the rotation was cut";
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("[DONE]"), std::string::npos);
  EXPECT_EQ(http_client(f.port(), tls.ctx).peer_common_name(), "second");

  auto metrics = http_get(f.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("tokengate_tls_certificate_reloads_total{result=\"success\"} 1\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("tokengate_tls_certificate_reloads_total{result=\"failure\"} 1\n"),
            std::string::npos);
  // Made with -days 2: it expires between one and three days from now.
  auto at = metrics.find("tokengate_tls_certificate_expiry_timestamp_seconds{listener=\"main\"} ");
  ASSERT_NE(at, std::string::npos) << metrics;
  auto expiry = std::stoll(metrics.substr(metrics.find("} ", at) + 2));
  auto now = static_cast<long long>(std::time(nullptr));
  EXPECT_GT(expiry, now + 86400);
  EXPECT_LT(expiry, now + 3 * 86400);
}

// A TLS client through memory BIOs, so that the test decides what goes into
// each TCP write.
struct memory_tls_client {
  client_context context{certificate().cert};
  SSL* ssl = SSL_new(context.ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);

  explicit memory_tls_client(std::uint16_t port) {
    SSL_set_bio(ssl, in, out);
    SSL_set_connect_state(ssl);
    SSL_set_tlsext_host_name(ssl, "localhost");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      throw std::runtime_error("connect");
    timeval five{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
  }
  ~memory_tls_client() {
    SSL_free(ssl);
    ::close(fd);
  }
  // What OpenSSL has written, sent in one write.
  void flush() {
    char* data = nullptr;
    auto n = BIO_get_mem_data(out, &data);
    if (n > 0) {
      ASSERT_EQ(::send(fd, data, static_cast<std::size_t>(n), MSG_NOSIGNAL), n);
    }
    (void)BIO_reset(out);
  }
  // Ciphertext from the socket into OpenSSL; false at the end or on a timeout.
  bool receive() {
    char buffer[16384];
    auto n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    BIO_write(in, buffer, static_cast<int>(n));
    return true;
  }
  // The handshake, all but the client's last flight, which waits in `out`.
  void handshake() {
    int done;
    while ((done = SSL_do_handshake(ssl)) != 1) {
      ASSERT_EQ(SSL_get_error(ssl, done), SSL_ERROR_WANT_READ);
      flush();
      ASSERT_TRUE(receive()) << "the handshake stopped";
    }
  }
  void write(const std::string& plain) {
    ASSERT_EQ(SSL_write(ssl, plain.data(), static_cast<int>(plain.size())),
              static_cast<int>(plain.size()));
  }
  // What OpenSSL can decrypt of what was received, appended to `plain`; the
  // last SSL_read's error (SSL_ERROR_WANT_READ: more is to come).
  int decrypt(std::string& plain) {
    char buffer[16384];
    int n;
    while ((n = SSL_read(ssl, buffer, sizeof buffer)) > 0) plain.append(buffer, n);
    return SSL_get_error(ssl, n);
  }
};

// A TLS 1.3 client may send its first request in the same flight as its
// Finished: the proxy's handshake then ends with the request's records
// already read from the socket, which must be answered all the same. Its
// answer ends with close_notify (a clean end of TLS, not a truncation).
TEST(Tls, ARequestSentWithTheHandshakesLastFlightIsAnswered) {
  proxy_fixture f(tls_listener());
  memory_tls_client c(f.port());
  c.handshake();
  // The Finished is still unsent: the request joins it in one TCP write.
  c.write(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":3})",
                    "Connection: close\r\n"));
  c.flush();
  std::string answer;
  int last = SSL_ERROR_WANT_READ;
  while ((last = c.decrypt(answer)) == SSL_ERROR_WANT_READ && c.receive()) {
  }
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 200")) << answer;
  EXPECT_NE(answer.find("data: [DONE]"), std::string::npos) << answer;
  EXPECT_EQ(last, SSL_ERROR_ZERO_RETURN) << "the answer ended without close_notify";
}

// TLS 1.2 lets a client ask for a new handshake at any time, the costly
// side of which is the server's: one connection could keep a core busy
// (CVE-2011-1473). The proxy refuses, as nginx does: the client is told
// no_renegotiation, which OpenSSL's client takes as the handshake's failure.
// (With renegotiation allowed, SSL_OP_ALLOW_CLIENT_RENEGOTIATION, this
// test fails: the proxy's SSL_read then writes the handshake's answer
// through its own BIO, and the client's renegotiation succeeds.)
TEST(Tls, AClientAskingToRenegotiateIsRefused) {
  proxy_fixture f(tls_listener());
  memory_tls_client c(f.port());
  SSL_set_max_proto_version(c.ssl, TLS1_2_VERSION);  // (TLS 1.3 has no renegotiation)
  c.handshake();
  c.flush();
  ASSERT_EQ(SSL_version(c.ssl), TLS1_2_VERSION);
  ASSERT_EQ(SSL_renegotiate(c.ssl), 1);
  int done;
  while ((done = SSL_do_handshake(c.ssl)) != 1 &&
         SSL_get_error(c.ssl, done) == SSL_ERROR_WANT_READ) {
    c.flush();
    if (!c.receive()) break;
  }
  EXPECT_NE(done, 1) << "the proxy renegotiated";
  EXPECT_EQ(ERR_GET_REASON(ERR_peek_error()), SSL_R_NO_RENEGOTIATION);
  EXPECT_EQ(metric(f, "tokengate_downstream_tls_handshakes_total"), 1u);
}

// A client that takes its answer slowly, 16 KiB at a time with pauses,
// makes the proxy's TLS writes find the socket full mid-record, and (its
// reads held back in turn) the upstream proxy's writes to it: OpenSSL holds
// the record until the socket has room, and the write goes on with the same
// bytes. Every token of a 10 MB answer must arrive, in order, once.
TEST(Tls, ASlowReaderGetsEveryEventInOrderThroughTlsOnBothSides) {
  proxy_fixture https_upstream(tls_listener());
  proxy_fixture f(through_tls(tls_listener(), https_upstream));
  memory_tls_client c(f.port());
  c.handshake();
  constexpr std::size_t tokens = 60000;
  c.write(post_json("/v1/chat/completions",
                    R"({"model":"demo","stream":true,"max_tokens":60000,)"
                    R"("demo":{"tokens":60000,"interval_ms":0,"ttft_ms":0}})"));
  c.flush();
  ASSERT_TRUE(wait_until([&] { return https_upstream.engine_stats().active.load() == 1; }, 2s,
                         "the stream to start"));
  std::this_thread::sleep_for(300ms);  // let every buffer on the way fill
  std::string answer;
  auto deadline = clock::now() + 30s;
  while (!answer.ends_with("\r\n0\r\n\r\n") && clock::now() < deadline && c.receive()) {
    ASSERT_EQ(c.decrypt(answer), SSL_ERROR_WANT_READ);
    std::this_thread::sleep_for(1ms);
  }
  auto seen = demo_tokens_in(answer);  // (still chunked: each event is whole inside one chunk)
  EXPECT_TRUE(seen.in_order) << "a token arrived out of place";
  EXPECT_EQ(seen.seen, tokens);
  EXPECT_NE(answer.find("data: [DONE]"), std::string::npos);
  EXPECT_GT(answer.size(), 9u << 20);
}

// Upstream connections over TLS go back to the pool after each response
// and carry the next request.
TEST(Tls, AnHttpsUpstreamConnectionCarriesTheNextRequest) {
  proxy_fixture https_upstream(tls_listener());
  proxy_fixture f(through_tls({}, https_upstream));
  stream_one_by_one(f, 3);
  EXPECT_EQ(https_upstream.engine_stats().requests.load(), 3u);
  // Each request went on a new connection or a reused one; with fewer
  // workers than requests, at least one was reused.
  auto opened = metric(https_upstream, "tokengate_downstream_cx_total");
  auto reused = metric(f, "tokengate_upstream_cx_reused_total");
  EXPECT_EQ(opened + reused, 3u);
  EXPECT_GE(reused, 1u);
}

// A new connection to a TLS upstream offers the session the last one was
// given (a TLS 1.3 ticket), and the upstream takes it: no certificate is
// sent or verified again. Both ends count it.
TEST(Tls, UpstreamTlsSessionsAreResumedOnNewConnections) {
  proxy_fixture https_upstream(tls_listener());
  fixture_options no_pool;  // every request opens a connection (and handshakes)
  no_pool.upstream_extra = "    pool_size: 0\n";
  proxy_fixture f(through_tls(no_pool, https_upstream));
  constexpr int requests = 6;
  stream_one_by_one(f, requests);
  EXPECT_EQ(metric(f, "tokengate_upstream_tls_handshakes_total"), requests);
  EXPECT_EQ(metric(https_upstream, "tokengate_downstream_tls_handshakes_total"), requests);
  // Each of the two workers' pools handshakes in full once at most.
  auto resumed = metric(f, "tokengate_upstream_tls_resumed_total");
  EXPECT_GE(resumed, requests - 2u);
  EXPECT_EQ(metric(https_upstream, "tokengate_downstream_tls_resumed_total"), resumed);
  EXPECT_EQ(metric(f, "tokengate_upstream_cx_reused_total"), 0u);
}

// An upstream that speaks TLS 1.2 at most (as some providers' and
// appliances' endpoints still do), played by hand with OpenSSL: it answers
// each connection with a short stream and closes it, and counts the
// handshakes it resumed. TLS 1.2 hands the client its session at the end
// of the handshake (a ticket or an id), not after it as TLS 1.3 does; the
// pools keep and offer it the same way.
class tls12_upstream {
 public:
  ~tls12_upstream() {
    server_.reset();  // (its thread uses the context)
    SSL_CTX_free(ctx_);
  }

  std::string base_url() const {
    return "https://localhost:" + std::to_string(server_->port()) + "/v1";
  }
  int handshakes() const { return handshakes_; }
  int resumed() const { return resumed_; }
  int other_versions() const { return other_versions_; }

 private:
  void serve(int listener) {
    std::signal(SIGPIPE,
                SIG_IGN);  // a write to a proxy that has gone is an error here, not the test's end
    for (;;) {
      int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) return;  // the listener was shut down
      SSL* ssl = SSL_new(ctx_);
      SSL_set_fd(ssl, fd);
      if (SSL_accept(ssl) == 1) {
        ++handshakes_;
        if (SSL_session_reused(ssl)) ++resumed_;
        if (SSL_version(ssl) != TLS1_2_VERSION) ++other_versions_;
        answer(ssl);
        SSL_shutdown(ssl);
      }
      SSL_free(ssl);
      ::close(fd);
    }
  }
  // Reads the request to the end of its body, then sends one short stream.
  static void answer(SSL* ssl) {
    std::string request;
    char bytes[4096];
    for (;;) {
      auto head_end = request.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        auto length_at = request.find("Content-Length: ");
        std::size_t length = length_at < head_end ? std::stoul(request.substr(length_at + 16)) : 0;
        if (request.size() >= head_end + 4 + length) break;
      }
      int n = SSL_read(ssl, bytes, sizeof bytes);
      if (n <= 0) return;
      request.append(bytes, static_cast<std::size_t>(n));
    }
    const std::string body =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"}}]}\n\ndata: [DONE]\n\n";
    const std::string response =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: "
        "close\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    SSL_write(ssl, response.data(), static_cast<int>(response.size()));
  }

  static SSL_CTX* make_context() {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, certificate().cert.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, certificate().key.c_str(), SSL_FILETYPE_PEM) != 1)
      throw std::runtime_error("the TLS 1.2 upstream cannot load the test certificate");
    return ctx;
  }

  SSL_CTX* ctx_ = make_context();  // (made before the thread that serves starts, below)
  std::atomic<int> handshakes_{0}, resumed_{0}, other_versions_{0};
  std::unique_ptr<hand_upstream> server_ =
      std::make_unique<hand_upstream>([this](int listener) { serve(listener); });
};

TEST(Tls, UpstreamTls12SessionsAreResumedToo) {
  tls12_upstream upstream;
  fixture_options o;
  o.base_url = upstream.base_url();
  o.upstream_extra = "    ca_file: " + certificate().cert.string() + "\n";
  proxy_fixture f(o);
  constexpr int requests = 6;
  stream_one_by_one(f, requests);
  ASSERT_EQ(upstream.handshakes(), requests);
  EXPECT_EQ(upstream.other_versions(), 0) << "every handshake was TLS 1.2";
  EXPECT_EQ(metric(f, "tokengate_upstream_tls_handshakes_total"), requests);
  // Each of the two workers' pools handshakes in full once at most.
  auto resumed = metric(f, "tokengate_upstream_tls_resumed_total");
  EXPECT_GE(resumed, requests - 2u);
  EXPECT_EQ(upstream.resumed(), static_cast<int>(resumed));
}

// A renegotiation asked for while the proxy's writes to the client wait
// for room (the client has not been reading): the refusal is an alert,
// which OpenSSL queues behind the record it holds for the waiting write
// (it does not make the read wait to write). The client reads on: a prefix
// of the stream in order, every record whole, then the refusal, which
// OpenSSL's client takes as fatal. When it leaves, the proxy drops the
// stream, and serves the next client.
TEST(Tls, ARenegotiationAskedWhileTheProxysWritesWaitIsRefusedAfterThem) {
  proxy_fixture f(tls_listener());
  memory_tls_client c(f.port());
  SSL_set_max_proto_version(c.ssl, TLS1_2_VERSION);
  c.handshake();
  c.write(post_json("/v1/chat/completions",
                    R"({"model":"demo","stream":true,"max_tokens":300000,)"
                    R"("demo":{"tokens":300000,"interval_ms":0,"ttft_ms":0}})"));
  c.flush();
  ASSERT_TRUE(
      wait_until([&] { return f.engine_stats().active.load() == 1; }, 2s, "the stream to start"));
  std::this_thread::sleep_for(300ms);  // let every buffer on the way fill
  ASSERT_EQ(SSL_renegotiate(c.ssl), 1);
  ASSERT_EQ(SSL_get_error(c.ssl, SSL_do_handshake(c.ssl)), SSL_ERROR_WANT_READ);
  c.flush();  // (the ClientHello)
  std::string answer;
  int last = SSL_ERROR_WANT_READ;
  auto deadline = clock::now() + 30s;
  while (last == SSL_ERROR_WANT_READ && clock::now() < deadline && c.receive())
    last = c.decrypt(answer);
  EXPECT_EQ(last, SSL_ERROR_SSL);
  EXPECT_EQ(ERR_GET_REASON(ERR_peek_error()), SSL_R_NO_RENEGOTIATION);
  auto seen = demo_tokens_in(answer);
  EXPECT_TRUE(seen.in_order) << "a token arrived out of place";
  EXPECT_GT(seen.seen, 0u);
  // 50 MB cannot all wait in the buffers on the way: the stream still runs.
  EXPECT_EQ(f.engine_stats().active.load(), 1u);
  // The client's own fatal alert goes out, then its FIN: the proxy must
  // see it gone and drop the stream upstream.
  c.flush();
  ::shutdown(c.fd, SHUT_WR);
  ASSERT_TRUE(wait_until([&] { return f.engine_stats().active.load() == 0; }, 10s,
                         "the stream to be dropped"));
  client_context tls(certificate().cert);
  http_client next(f.port(), tls.ctx);
  next.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":3})"));
  auto r = read_response(next);
  ASSERT_TRUE(r.complete);
  EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos);
}

// A TLS 1.3 client may ask the proxy to change its sending keys (a
// KeyUpdate asking for one back). The proxy's answer is written from its
// client watcher's read, here while the proxy's writes of a long stream
// wait for room (the client has not been reading): OpenSSL must not mix
// the two records. The client gets the proxy's KeyUpdate, and every token,
// in order, under the new keys.
int key_updates_received = 0;
void count_key_updates(int written, int, int content_type, const void* message, std::size_t size,
                       SSL*, void*) {
  constexpr unsigned char key_update = 24;
  if (!written && content_type == SSL3_RT_HANDSHAKE && size > 0 &&
      static_cast<const unsigned char*>(message)[0] == key_update)
    ++key_updates_received;
}

TEST(Tls, AKeyUpdateAskedWhileTheProxysWritesWaitIsAnsweredAndTheStreamGoesOn) {
  proxy_fixture f(tls_listener());
  memory_tls_client c(f.port());
  SSL_set_msg_callback(c.ssl, count_key_updates);
  key_updates_received = 0;
  c.handshake();
  constexpr std::size_t tokens = 120000;  // (20 MB: more than the buffers on the way hold)
  c.write(post_json("/v1/chat/completions",
                    R"({"model":"demo","stream":true,"max_tokens":120000,)"
                    R"("demo":{"tokens":120000,"interval_ms":0,"ttft_ms":0}})"));
  c.flush();
  ASSERT_TRUE(
      wait_until([&] { return f.engine_stats().active.load() == 1; }, 2s, "the stream to start"));
  std::this_thread::sleep_for(300ms);  // let every buffer on the way fill
  ASSERT_EQ(f.engine_stats().active.load(), 1u) << "the stream ended before the key update";
  ASSERT_EQ(SSL_key_update(c.ssl, SSL_KEY_UPDATE_REQUESTED), 1);
  ASSERT_EQ(SSL_do_handshake(c.ssl), 1);
  c.flush();
  std::string answer;
  auto deadline = clock::now() + 60s;
  while (!answer.ends_with("\r\n0\r\n\r\n") && clock::now() < deadline && c.receive()) {
    ASSERT_EQ(c.decrypt(answer), SSL_ERROR_WANT_READ);
  }
  EXPECT_EQ(key_updates_received, 1);
  auto seen = demo_tokens_in(answer);
  EXPECT_TRUE(seen.in_order) << "a token arrived out of place";
  EXPECT_EQ(seen.seen, tokens);
  EXPECT_NE(answer.find("data: [DONE]"), std::string::npos);
}
}  // namespace
}  // namespace tokengate::test
