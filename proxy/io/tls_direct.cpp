#include "io/tls_direct.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <boost/asio/ssl/error.hpp>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

#include "io/plain_syscalls.hpp"

namespace tokengate::tls_direct {
namespace {

// What the BIO knows: the socket (its descriptor is looked up at each
// call) and how the last receive ended.
struct socket_bio_state {
  tcp::socket* socket;
  bool ended = false;  // the peer's FIN was read
  int last_errno = 0;
  int queued_after =
      -1;  // what the kernel still held after this call's last receive (TCP_INQ); -1: unknown
};

socket_bio_state& state_of(BIO* bio) { return *static_cast<socket_bio_state*>(BIO_get_data(bio)); }

int bio_read(BIO* bio, char* out, int size) {
  auto& st = state_of(bio);
  BIO_clear_retry_flags(bio);
  if (!st.socket->is_open()) {
    st.last_errno = EBADF;
    return -1;
  }
  // recvmsg, for what the kernel still holds after it (TCP_INQ, where the
  // socket has it on: enable_drained_reads), as the plain reads do.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr message;
  auto n = receive_into(st.socket->native_handle(), out, static_cast<std::size_t>(size), control,
                        MSG_DONTWAIT, message);
  st.queued_after = -1;
  if (n < 0) {
    st.last_errno = errno;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(bio);
  } else if (n == 0) {
    st.ended = true;
  } else {
    for (auto* c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c))
      if (c->cmsg_level == IPPROTO_TCP && c->cmsg_type == TCP_CM_INQ)
        std::memcpy(&st.queued_after, CMSG_DATA(c), sizeof(int));
  }
  return static_cast<int>(n);
}

int bio_write(BIO* bio, const char* data, int size) {
  auto& st = state_of(bio);
  BIO_clear_retry_flags(bio);
  if (!st.socket->is_open()) {
    st.last_errno = EBADF;
    return -1;
  }
  iovec piece{const_cast<char*>(data), static_cast<std::size_t>(size)};
  msghdr message{};
  message.msg_iov = &piece;
  message.msg_iovlen = 1;
  ssize_t n;
  do n = sendmsg_plain(st.socket->native_handle(), &message, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    st.last_errno = errno;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(bio);
  }
  return static_cast<int>(n);
}

long bio_ctrl(BIO* bio, int command, long, void*) {
  switch (command) {
    case BIO_CTRL_FLUSH:
      return 1;  // every write went to the kernel
    case BIO_CTRL_EOF:
      return state_of(bio).ended ? 1 : 0;  // OpenSSL tells a truncation from an error by it
    default:
      return 0;
  }
}

int bio_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

int bio_destroy(BIO* bio) {
  delete static_cast<socket_bio_state*>(BIO_get_data(bio));
  BIO_set_data(bio, nullptr);
  return 1;
}

BIO_METHOD* socket_method() {
  static BIO_METHOD* method = [] {
    auto* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tokengate socket");
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    BIO_meth_set_destroy(m, bio_destroy);
    return m;
  }();
  return method;
}

// The outcome of an SSL call that returned `result` <= 0, as Asio's own
// stream reports it (so that is_disconnect and the logs read the same).
io_result failure(SSL* ssl, int result) {
  switch (SSL_get_error(ssl, result)) {
    case SSL_ERROR_WANT_READ:
      return {0, {}, wait_for::readable};
    case SSL_ERROR_WANT_WRITE:
      return {0, {}, wait_for::writable};
    case SSL_ERROR_ZERO_RETURN:
      return {0, net::error::eof};
    case SSL_ERROR_SYSCALL: {
      auto* bio = SSL_get_rbio(ssl);
      int e = bio ? state_of(bio).last_errno : 0;
      if (e == 0) return {0, net::ssl::error::stream_truncated};
      return {0, error_code(e, boost::system::system_category())};
    }
    case SSL_ERROR_SSL: {
      auto code = ERR_get_error();
      if (ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
        return {0, net::ssl::error::stream_truncated};
      return {0, error_code(static_cast<int>(code), net::error::get_ssl_category())};
    }
    default:
      return {0, net::ssl::error::unspecified_system_error};
  }
}

// Before each call: no stale error from an earlier one.
void forget_errors(SSL* ssl) {
  ERR_clear_error();
  auto& st = state_of(SSL_get_rbio(ssl));
  st.last_errno = 0;
  st.queued_after = -1;
}

}  // namespace

SSL* attach(SSL_CTX* ctx, tcp::socket& socket, bool server) {
  SSL* ssl = SSL_new(ctx);
  if (!ssl) return nullptr;
  BIO* bio = BIO_new(socket_method());
  if (!bio) {
    SSL_free(ssl);
    return nullptr;
  }
  BIO_set_data(bio, new socket_bio_state{&socket});
  SSL_set_bio(ssl, bio, bio);
  // A write that had to wait is repeated with the same bytes, not always
  // from the same address (write gathers pieces into a buffer of its own);
  // OpenSSL's record buffers are freed while empty, which is most of a
  // stream's life (Asio's stream set the same modes).
  SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                        SSL_MODE_RELEASE_BUFFERS);
  // Records are read as many at a time as have arrived, not header and body
  // in two receives each.
  SSL_set_read_ahead(ssl, 1);
  if (server)
    SSL_set_accept_state(ssl);
  else
    SSL_set_connect_state(ssl);
  return ssl;
}

bool expect_server(SSL* ssl, const std::string& host) {
  return SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 && SSL_set1_host(ssl, host.c_str()) == 1;
}

io_result handshake(SSL* ssl) {
  forget_errors(ssl);
  int r = SSL_do_handshake(ssl);
  if (r == 1) return {};
  return failure(ssl, r);
}

io_result read(SSL* ssl, net::mutable_buffer into) {
  if (into.size() == 0) return {};
  forget_errors(ssl);
  int n = SSL_read(ssl, into.data(), static_cast<int>(std::min<std::size_t>(into.size(), INT_MAX)));
  if (n <= 0) return failure(ssl, n);
  io_result r{static_cast<std::size_t>(n)};
  // Drained: this call's receive left the kernel nothing (a FIN counts as
  // a byte there) and OpenSSL holds nothing either, not even part of a record.
  const auto& st = state_of(SSL_get_rbio(ssl));
  r.drained = st.queued_after == 0 && !SSL_has_pending(ssl);
  return r;
}

io_result write(SSL* ssl, std::span<const net::const_buffer> pieces) {
  std::size_t total = 0;
  for (const auto& p : pieces) total += p.size();
  if (total == 0) return {};
  auto wanted = std::min(total, record_plaintext);
  const void* data = nullptr;
  // A single piece goes as it is; several are gathered into one record
  // (one syscall for the event's size line, bytes and CRLF, not three).
  static thread_local std::array<char, record_plaintext> gathered;
  if (pieces.front().size() >= wanted) {
    data = pieces.front().data();
  } else {
    std::size_t at = 0;
    for (const auto& p : pieces) {
      auto n = std::min(p.size(), wanted - at);
      std::memcpy(gathered.data() + at, p.data(), n);
      at += n;
      if (at == wanted) break;
    }
    data = gathered.data();
  }
  forget_errors(ssl);
  int n = SSL_write(ssl, data, static_cast<int>(wanted));
  if (n > 0) return {static_cast<std::size_t>(n)};
  return failure(ssl, n);
}

io_result shutdown(SSL* ssl) {
  forget_errors(ssl);
  int r = SSL_shutdown(ssl);
  if (r >= 0) return {};
  auto f = failure(ssl, r);
  if (f.wait == wait_for::readable)
    return {};  // (only when the peer's close_notify is awaited: it is not)
  return f;
}

}  // namespace tokengate::tls_direct
