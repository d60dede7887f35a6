#pragma once
// TLS session resumption towards an upstream, as nginx's
// proxy_ssl_session_reuse: each pool keeps the last session its upstream
// gave it (a TLS 1.3 ticket, or a TLS 1.2 session) and offers it on the next
// connection it opens. A resumed handshake skips the certificate chain (its
// bytes, its signature check and the path building), which is most of what
// a new connection to a hosted provider costs the proxy. The peer's
// certificate was verified, for this host and against this pool's CA, when
// the session was first made; a pool is only ever for one URL and one CA
// (server/worker.cpp), so a session never crosses to another host.
//
// Threads: a pool, its connections and their SSL objects belong to one
// worker, and so does its client context (one per worker and CA), whose
// callback files each new session; nothing here is shared between threads.
#include <openssl/ssl.h>

#include <memory>

namespace tokengate::upstream {

// The latest session one pool was given.
class latest_session {
 public:
  latest_session() = default;
  latest_session(const latest_session&) = delete;
  latest_session& operator=(const latest_session&) = delete;
  ~latest_session();

  // Takes the caller's reference.
  void keep(SSL_SESSION* session);
  // The session to offer, if one is kept and may still be resumed.
  SSL_SESSION* resumable() const;

 private:
  SSL_SESSION* session_ = nullptr;
};

// Has the client context hand each session its upstream issues to the
// connection's latest_session (see resume_from) instead of OpenSSL's own cache,
// which would grow and take a lock.
void enable_resumption(SSL_CTX* ctx);

// Before a connection's handshake: offers the pool's kept session, and
// files the sessions this connection is given into the pool's (shared, as
// a connection may outlive its pool at shutdown). False if OpenSSL could
// not take either, which only costs the resumption.
bool resume_from(SSL* ssl, const std::shared_ptr<latest_session>& sessions);

}  // namespace tokengate::upstream
