#pragma once
// TLS read from and written to the socket directly, handshake included.
//
// Asio's ssl::stream puts a memory BIO pair between OpenSSL and the socket:
// every record OpenSSL writes is copied out of the pair into Asio's buffer
// and sent by an asynchronous write (an operation set up, its completion
// queued, the coroutine suspended and resumed), every record read is
// received into Asio's buffer and copied into the pair. Relaying one event
// to a TLS client took 22.7 µs of the proxy's CPU against nginx's 18.9–20.1
// (tests/bench/per_event.sh with TLS=1, 2,000 slow streams), the same
// syscalls on both sides: the difference was that machinery. And its four
// buffers of 17 KiB (the stream's two and the pair's) were most of what a
// connection held during its handshake. nginx gives OpenSSL the socket
// itself.
//
// So does this: `attach` gives a new connection's OpenSSL state a BIO on
// the socket's descriptor, and the calls below handshake, read and write
// through it without waiting: each says what it needs when it cannot go on
// (the socket readable or writable), and the caller waits for that with
// the reactor (any_stream.hpp). The descriptor stays the tcp::socket's: the
// BIO reaches it through the socket, so a closed socket is never read or
// written under a number reused since.
#include <openssl/ssl.h>

#include <cstddef>
#include <span>
#include <string>

#include "io/net.hpp"

namespace tokengate::tls_direct {

// OpenSSL's state for a new connection on `socket` (which must stay at its
// address), the server's or the client's end; null if OpenSSL could not
// make it (out of memory).
SSL* attach(SSL_CTX* ctx, tcp::socket& socket, bool server);

// What a call could not do without waiting.
enum class wait_for { nothing, readable, writable };

struct io_result {
  std::size_t bytes = 0;  // taken or given
  error_code ec;  // eof on close_notify, ssl::error::stream_truncated on a TCP end without it
  wait_for wait = wait_for::nothing;
  bool drained = false;  // (a read) the socket and OpenSSL had nothing after these bytes
};

// A client's connection to `host`: SNI, so that a shared front end picks
// the right certificate, and the name the certificate must hold, so that a
// valid certificate for another name is refused (SSL_set1_host takes an
// address as one). False when OpenSSL could not set them.
bool expect_server(SSL* ssl, const std::string& host);

// The handshake, as far as it can go now: done (ec empty), failed, or what to wait for.
io_result handshake(SSL* ssl);

// Decrypted bytes into `into` (at most its size): some, an error or end, or what to wait for.
io_result read(SSL* ssl, net::mutable_buffer into);

// The largest plaintext written in one call: one TLS record. Bytes beyond
// it are left to the next call, which the callers make as the plain socket's
// partial writes are answered.
inline constexpr std::size_t record_plaintext = 16384;

// The pieces' first bytes (up to one record) encrypted and sent. A write
// that had to wait must be repeated with the same bytes first (OpenSSL holds
// its record until then): the callers do, since what they write next is
// always the unsent rest of the same pieces.
io_result write(SSL* ssl, std::span<const net::const_buffer> pieces);

// close_notify sent, without waiting for the peer's (as nginx): what to wait
// for when the socket took none of it.
io_result shutdown(SSL* ssl);

}  // namespace tokengate::tls_direct
