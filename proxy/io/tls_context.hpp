#pragma once
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

namespace tokengate {

// Server side: certificate chain + key, TLS 1.2 minimum, ALPN http/1.1.
// Throws std::runtime_error naming the file on a bad certificate or key.
std::shared_ptr<boost::asio::ssl::context> make_server_tls_context(const std::string& cert_file,
                                                                   const std::string& key_file);

// Client side (to HTTPS upstreams): verify the peer against the system store,
// or against ca_file when one is given. SNI and host name checks are per
// connection (see upstream/pool.cpp).
std::shared_ptr<boost::asio::ssl::context> make_client_tls_context(const std::string& ca_file);

}  // namespace tokengate
