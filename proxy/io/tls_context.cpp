#include "io/tls_context.hpp"

#include <openssl/ssl.h>

#include <cstring>
#include <stdexcept>

namespace tokengate {
namespace ssl = boost::asio::ssl;
namespace {

constexpr unsigned char alpn_http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// We speak HTTP/1.1 only; a client that offers h2 alone gets no ALPN match
// and OpenSSL continues without ALPN, which curl and browsers accept.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned int inlen, void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, alpn_http11, sizeof(alpn_http11), in, inlen) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

void harden(ssl::context& ctx) {
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                  ssl::context::no_sslv3 | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
  // TLS 1.2 renegotiation is refused both ways, as nginx does. A client
  // may ask for a new handshake at any time, and the server's side of one
  // costs many times the client's: one connection could keep a core busy
  // (CVE-2011-1473). (OpenSSL 3 already refuses client-initiated ones by
  // default, 1.1.1 did not: said here, not left to a library default.)
  // Towards upstreams nothing needs it: no client certificates are sent.
  SSL_CTX_set_options(ctx.native_handle(), SSL_OP_NO_RENEGOTIATION);
}

}  // namespace

std::shared_ptr<ssl::context> make_server_tls_context(const std::string& cert_file,
                                                      const std::string& key_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  harden(*ctx);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec)
    throw std::runtime_error("tls: cannot load certificate " + cert_file + ": " + ec.message());
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec) throw std::runtime_error("tls: cannot load key " + key_file + ": " + ec.message());
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    throw std::runtime_error("tls: key " + key_file + " does not match certificate " + cert_file);
  SSL_CTX_set_alpn_select_cb(ctx->native_handle(), select_alpn, nullptr);
  return ctx;
}

std::shared_ptr<ssl::context> make_client_tls_context(const std::string& ca_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  harden(*ctx);
  boost::system::error_code ec;
  if (ca_file.empty())
    ctx->set_default_verify_paths(ec);
  else
    ctx->load_verify_file(ca_file, ec);
  if (ec)
    throw std::runtime_error("tls: cannot load CA " + (ca_file.empty() ? "store" : ca_file) + ": " +
                             ec.message());
  ctx->set_verify_mode(ssl::verify_peer);
  SSL_CTX_set_alpn_protos(ctx->native_handle(), alpn_http11, sizeof(alpn_http11));
  return ctx;
}

}  // namespace tokengate
