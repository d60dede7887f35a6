#pragma once
// The certificate and key a TLS listener presents, replaceable while it
// serves. Certificates are rotated in place (cert-manager, certbot, a
// Kubernetes Secret update): a reload reads the files again and, only when
// they load and match, new handshakes use them. Connections already open keep
// the context they started with (each holds a reference), so a rotation never
// breaks a stream in flight.
#include <atomic>
#include <boost/asio/ssl/context.hpp>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

namespace tokengate {

class tls_credentials {
 public:
  // Loads the files; throws std::runtime_error naming the file when they do
  // not load (start-up must fail loudly).
  tls_credentials(std::string cert_file, std::string key_file);

  // The context for the next handshake. Any thread.
  std::shared_ptr<boost::asio::ssl::context> current() const {
    return current_.load(std::memory_order_acquire);
  }

  // Reads the files again. On failure the running certificate stays and the
  // error is thrown (naming the file). Any thread.
  void reload();
  // True when either file's modification time differs from the last load
  // attempt: what the file watcher asks once a second.
  bool files_changed() const;

  // The certificate's notAfter as Unix seconds (for the expiry metric).
  long long not_after() const { return not_after_.load(std::memory_order_relaxed); }
  const std::string& cert_file() const { return cert_file_; }

 private:
  using file_times = std::pair<std::filesystem::file_time_type, std::filesystem::file_time_type>;
  file_times read_file_times() const;

  std::string cert_file_, key_file_;
  std::atomic<std::shared_ptr<boost::asio::ssl::context>> current_;
  std::atomic<long long> not_after_{0};
  mutable std::mutex
      attempt_mutex_;  // reload() and files_changed() from the control thread and tests
  file_times attempted_;
};

}  // namespace tokengate
