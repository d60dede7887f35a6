#include "upstream/tls_resumption.hpp"

namespace tokengate::upstream {
namespace {

using shared_sessions = std::shared_ptr<latest_session>;

// The connection's pool's latest_session, owned by the SSL object (a
// heap-held shared_ptr) and let go when OpenSSL frees it.
void release_sessions(void*, void* held, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<shared_sessions*>(held);
}

int sessions_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, release_sessions);
  return index;
}

// OpenSSL's call when the upstream gives this connection a session: the
// handshake's end in TLS 1.2, each ticket after it in TLS 1.3 (two after a
// full handshake from OpenSSL servers). 1: the reference is ours now.
int file_new_session(SSL* ssl, SSL_SESSION* session) {
  auto* sessions = static_cast<shared_sessions*>(SSL_get_ex_data(ssl, sessions_index()));
  if (!sessions) return 0;  // a connection that is not a pool's (tokengate bench's)
  (*sessions)->keep(session);
  return 1;
}

}  // namespace

latest_session::~latest_session() {
  if (session_) SSL_SESSION_free(session_);
}

void latest_session::keep(SSL_SESSION* session) {
  if (session_) SSL_SESSION_free(session_);
  session_ = session;
}

SSL_SESSION* latest_session::resumable() const {
  // (A ticket past its lifetime is not offered by OpenSSL itself either.)
  return session_ && SSL_SESSION_is_resumable(session_) ? session_ : nullptr;
}

void enable_resumption(SSL_CTX* ctx) {
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, file_new_session);
}

bool resume_from(SSL* ssl, const std::shared_ptr<latest_session>& sessions) {
  auto* held = new shared_sessions(sessions);
  if (SSL_set_ex_data(ssl, sessions_index(), held) != 1) {
    delete held;
    return false;
  }
  if (auto* offer = sessions->resumable()) return SSL_set_session(ssl, offer) == 1;
  return true;
}

}  // namespace tokengate::upstream
