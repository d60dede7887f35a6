#include "support/http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <stdexcept>

namespace tokengate::test {

http_client::http_client(std::uint16_t port, SSL_CTX* tls, const std::string& server_name,
                         const char* source) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (source) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &local.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
      ::close(fd_);
      throw std::runtime_error(std::string("cannot bind to ") + source);
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd_);
    throw std::runtime_error("connect to port " + std::to_string(port) + " failed");
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (tls) {
    ssl_ = SSL_new(tls);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, server_name.c_str());
    SSL_set1_host(ssl_, server_name.c_str());
    if (SSL_connect(ssl_) != 1) {
      SSL_free(ssl_);
      ssl_ = nullptr;
      ::close(fd_);
      fd_ = -1;
      throw std::runtime_error("TLS handshake failed");
    }
  }
}

std::string http_client::peer_common_name() const {
  X509* cert = ssl_ ? SSL_get0_peer_certificate(ssl_) : nullptr;
  if (!cert) return "";
  char name[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, name, sizeof(name));
  return name;
}

http_client::~http_client() {
  if (ssl_) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

void http_client::send(const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    long n = ssl_ ? SSL_write(ssl_, bytes.data() + sent, static_cast<int>(bytes.size() - sent))
                  : ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error("send failed");
    sent += static_cast<std::size_t>(n);
  }
}

bool http_client::read_some(std::chrono::milliseconds timeout) {
  if (eof_ || fd_ < 0) return false;
  auto deadline = clock::now() + timeout;
  for (;;) {
    if (!(ssl_ && SSL_pending(ssl_) > 0)) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
      if (left.count() < 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    }
    char buf[16384];
    long n = ssl_ ? SSL_read(ssl_, buf, sizeof(buf)) : ::recv(fd_, buf, sizeof(buf), 0);
    if (n > 0) {
      raw_.append(buf, static_cast<std::size_t>(n));
      arrivals_.push_back({clock::now(), raw_.size()});
      return true;
    }
    if (ssl_ && n < 0 && SSL_get_error(ssl_, static_cast<int>(n)) == SSL_ERROR_WANT_READ) continue;
    eof_ = true;
    return false;
  }
}

clock::time_point http_client::arrival_of(std::size_t offset) const {
  for (const auto& a : arrivals_)
    if (offset < a.end_offset) return a.at;
  return clock::time_point::max();
}

void http_client::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void http_client::reset() {
  if (fd_ < 0) return;
  linger l{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close();
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Parses the head if it is all there; returns the body offset or npos.
std::size_t parse_head(const std::string& raw, http_response& r) {
  auto end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return std::string::npos;
  auto status_end = raw.find("\r\n");
  r.status = std::stoi(raw.substr(9, 3));
  std::size_t pos = status_end + 2;
  while (pos < end) {
    auto eol = raw.find("\r\n", pos);
    auto line = raw.substr(pos, eol - pos);
    auto colon = line.find(':');
    auto value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    r.headers[lower(line.substr(0, colon))] = value;
    pos = eol + 2;
  }
  return end + 4;
}

// De-chunks what is there; true once the last chunk has been seen.
bool dechunk(const std::string& raw, std::size_t pos, std::string& body) {
  body.clear();
  for (;;) {
    auto eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) return false;
    auto size = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
    if (size == 0) return raw.find("\r\n", eol + 2) != std::string::npos;
    if (raw.size() < eol + 2 + size + 2) return false;
    body.append(raw, eol + 2, size);
    pos = eol + 2 + size + 2;
  }
}

}  // namespace

http_response read_response(http_client& c, std::chrono::milliseconds timeout) {
  auto deadline = clock::now() + timeout;
  http_response r;
  std::size_t body_at = std::string::npos;
  for (;;) {
    if (body_at == std::string::npos) {
      body_at = parse_head(c.raw(), r);
      r.body_offset = body_at == std::string::npos ? 0 : body_at;
    }
    if (body_at != std::string::npos) {
      // (The body is copied out once it is all there, or at the deadline:
      // a copy after every read was quadratic, seconds for the 7 MB of
      // /demo/stats under TSan.)
      if (r.headers.count("content-length")) {
        auto length = std::stoul(r.headers["content-length"]);
        if (c.raw().size() - body_at >= length) {
          r.body = c.raw().substr(body_at, length);
          r.complete = true;
          return r;
        }
      } else if (lower(r.headers["transfer-encoding"]) == "chunked") {
        if (dechunk(c.raw(), body_at, r.body)) {
          r.complete = true;
          return r;
        }
      } else if (c.eof()) {
        r.body = c.raw().substr(body_at);
        return r;
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0 || c.eof()) {  // incomplete: the body as far as it came
      bool chunked = lower(r.headers["transfer-encoding"]) == "chunked";
      if (body_at != std::string::npos && !chunked) {
        auto length = r.headers.count("content-length") ? std::stoul(r.headers["content-length"])
                                                        : std::string::npos;
        r.body = c.raw().substr(body_at, length);
      }
      return r;
    }
    c.read_some(left);
  }
}

std::string error_code_of(const http_response& r) {
  return std::string(boost::json::parse(r.body).at("error").at("code").as_string());
}

std::string post_json(const std::string& path, const std::string& body,
                      const std::string& extra_headers) {
  return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace tokengate::test
