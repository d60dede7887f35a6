#pragma once
// A deliberately simple blocking HTTP/1.1 client over real sockets (plain or
// TLS via OpenSSL), written for tests: every read has a deadline, every byte
// is timestamped on arrival, and it can close or reset at any moment.
#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tokengate::test {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct arrival {
  clock::time_point at;
  std::size_t end_offset;  // offset in raw() just past this read's bytes
};

class http_client {
 public:
  // Throws std::runtime_error if the connection (or TLS handshake) fails.
  // `source`: the local address to connect from (another loopback address
  // plays another client).
  explicit http_client(std::uint16_t port, SSL_CTX* tls = nullptr,
                       const std::string& server_name = "localhost", const char* source = nullptr);
  ~http_client();
  http_client(const http_client&) = delete;

  void send(const std::string& bytes);
  // Reads what arrives before the deadline; false on timeout or EOF.
  bool read_some(std::chrono::milliseconds timeout);
  bool eof() const { return eof_; }
  const std::string& raw() const { return raw_; }
  const std::vector<arrival>& arrivals() const { return arrivals_; }
  // When the byte at `offset` of raw() arrived.
  clock::time_point arrival_of(std::size_t offset) const;

  // Forgets what was read so far (the next response on a kept-alive connection).
  void clear() {
    raw_.clear();
    arrivals_.clear();
  }
  // Forgets the first `n` bytes read (one response), keeping what follows.
  void consume(std::size_t n) {
    raw_.erase(0, n);
    arrivals_.clear();
    arrivals_.push_back({clock::now(), raw_.size()});
  }

  // The common name of the certificate the server presented ("" on plain TCP).
  std::string peer_common_name() const;

  void close();  // FIN
  void reset();  // RST (SO_LINGER 0)

 private:
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  bool eof_ = false;
  std::string raw_;
  std::vector<arrival> arrivals_;
};

struct http_response {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
  bool complete = false;        // framing ended properly (length reached / last chunk)
  std::size_t body_offset = 0;  // where the body starts in raw()
};

// Reads one response; stops at the deadline with complete == false.
http_response read_response(http_client& c, std::chrono::milliseconds timeout = 10s);

// "POST path" with a JSON body and optional extra header lines ("Name: value\r\n").
std::string post_json(const std::string& path, const std::string& body,
                      const std::string& extra_headers = "");

// The `error.code` of an OpenAI-style JSON error body (throws if there is none).
std::string error_code_of(const http_response& r);

}  // namespace tokengate::test
