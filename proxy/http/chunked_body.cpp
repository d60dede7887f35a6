#include "http/chunked_body.hpp"

#include <boost/beast/http/error.hpp>

namespace tokengate {

std::size_t take_chunks(body_decoder& decoder, std::span<char> bytes, body_bytes& body,
                        std::size_t limit, error_code& ec) {
  std::size_t used = 0;
  while (used < bytes.size() && !decoder.done()) {
    auto r = decoder.decode(bytes.subspan(used), ec);
    if (ec) return used;
    if (r.size > limit - body.size()) {
      ec = http::error::body_limit;
      return used;
    }
    const char* payload = bytes.data() + used + r.begin;
    body.insert(body.end(), payload, payload + r.size);
    used += r.used;
    if (r.used == 0) break;  // (a line not yet whole)
  }
  return used;
}

}  // namespace tokengate
