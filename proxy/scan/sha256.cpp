#include "scan/sha256.hpp"

#include <openssl/evp.h>

#include <memory>

#include "scan/hex.hpp"

namespace tokengate {
namespace {

// OpenSSL 3 looks an algorithm up by name on every use of EVP_sha256():
// a lock and a table search, 20,000 instructions a digest of a short
// text under callgrind. Fetched once and a context kept per thread, a
// digest is only the hashing. (Should either fail, the one-call form
// still gives the digest.)
const EVP_MD* sha256_algorithm() {
  static EVP_MD* const fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return fetched;
}

struct context_free {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

}  // namespace

std::string sha256_hex(std::string_view data) {
  thread_local std::unique_ptr<EVP_MD_CTX, context_free> context(EVP_MD_CTX_new());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  auto* c = context.get();
  if (!c || EVP_DigestInit_ex2(c, sha256_algorithm(), nullptr) != 1 ||
      EVP_DigestUpdate(c, data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(c, digest, &length) != 1)
    EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  return to_hex(digest, length);
}

}  // namespace tokengate
