// TLS in (a listener with a certificate made by openssl at test time) and
// TLS out (an HTTPS upstream, verified or refused).
#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <cstdlib>
#include <filesystem>

#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

namespace fs = std::filesystem;

// A self-signed certificate for localhost / 127.0.0.1, made once per run.
struct test_certificate {
  fs::path dir, cert, key;
  test_certificate() {
    dir = fs::temp_directory_path() / ("tokengate-tls-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    cert = dir / "cert.pem";
    key = dir / "key.pem";
    auto cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost "
               "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
               key.string() + " -out " + cert.string() + " 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("openssl could not make a certificate");
  }
  ~test_certificate() { fs::remove_all(dir); }
};

const test_certificate& certificate() {
  static test_certificate c;
  return c;
}

std::string tls_listener_yaml() {
  return "    tls:\n      cert_file: " + certificate().cert.string() + "\n      key_file: " + certificate().key.string() + "\n";
}

// A fixture whose listener speaks TLS with the test certificate.
fixture_options tls_listener() {
  fixture_options o;
  o.listener_extra = tls_listener_yaml();
  return o;
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
    c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":)" + std::to_string(i) + "}"));
    auto r = read_response(c);
    ASSERT_TRUE(r.complete) << "request " << i;
    EXPECT_NE(r.body.find("[DONE]"), std::string::npos);
    c.clear();  // the whole response was read
  }
  auto metrics = http_get(f.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("tokengate_downstream_cx_total 1\n"), std::string::npos);
}

TEST(Tls, ListenerRejectsPlainHttp) {
  proxy_fixture f(tls_listener());
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo"})"));
  auto r = read_response(c, 3s);
  EXPECT_EQ(r.status, 0) << "no HTTP answer on a TLS port";
  EXPECT_TRUE(c.eof());
}

TEST(Tls, Tls10And11AreRefused) {
  proxy_fixture f(tls_listener());
  for (int version : {TLS1_VERSION, TLS1_1_VERSION}) {
    client_context old(certificate().cert);
    SSL_CTX_set_security_level(old.ctx, 0);  // let this client offer what OpenSSL 3 would not
    SSL_CTX_set_min_proto_version(old.ctx, version);
    SSL_CTX_set_max_proto_version(old.ctx, version);
    EXPECT_THROW(http_client(f.port(), old.ctx), std::runtime_error) << "version " << std::hex << version;
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

  fixture_options o;
  o.base_url = "https://localhost:" + std::to_string(https_upstream.port()) + "/v1";
  o.upstream_extra = "    ca_file: " + certificate().cert.string() + "\n";
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":2})"));
  auto r = read_response(c);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"content\":\" quick\""), std::string::npos);
  EXPECT_EQ(https_upstream.engine_stats().requests.load(), 1u);
}

}  // namespace
}  // namespace tokengate::test
