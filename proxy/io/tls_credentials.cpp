#include "io/tls_credentials.hpp"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <ctime>

#include "io/tls_context.hpp"

namespace tokengate {
namespace {

long long certificate_not_after(boost::asio::ssl::context& ctx) {
  X509* cert = SSL_CTX_get0_certificate(ctx.native_handle());
  std::tm tm{};
  if (!cert || ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return 0;
  return static_cast<long long>(timegm(&tm));
}

}  // namespace

tls_credentials::tls_credentials(std::string cert_file, std::string key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {
  attempted_ = read_file_times();
  auto ctx = make_server_tls_context(cert_file_, key_file_);
  not_after_ = certificate_not_after(*ctx);
  current_.store(std::move(ctx));
}

tls_credentials::file_times tls_credentials::read_file_times() const {
  // A missing file reads as the epoch: its return is then a change.
  std::error_code ignored;
  return {std::filesystem::last_write_time(cert_file_, ignored),
          std::filesystem::last_write_time(key_file_, ignored)};
}

void tls_credentials::reload() {
  {
    // Remember what we tried, good or bad: a half-written pair is retried
    // when the other file lands, not every second in between.
    std::lock_guard lock(attempt_mutex_);
    attempted_ = read_file_times();
  }
  auto ctx = make_server_tls_context(cert_file_, key_file_);  // throws: the old one stays
  not_after_ = certificate_not_after(*ctx);
  current_.store(std::move(ctx), std::memory_order_release);
}

bool tls_credentials::files_changed() const {
  std::lock_guard lock(attempt_mutex_);
  return read_file_times() != attempted_;
}

}  // namespace tokengate
