#pragma once
// Bytes written as lower-case hex, and the random ids written so: request
// ids, budget reservations (128 bits each). One alphabet for the digests
// (SHA-256 of a key, SHA-1 of a Redis script), the trace ids and JSON's
// \u escapes.
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

namespace tokengate {

inline constexpr char hex_digits[] = "0123456789abcdef";

inline std::string to_hex(const std::uint8_t* bytes, std::size_t n) {
  std::string out(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = hex_digits[bytes[i] >> 4];
    out[2 * i + 1] = hex_digits[bytes[i] & 15];
  }
  return out;
}

// 32 hex digits from this thread's own generator (seeded once from the
// system's entropy): an id no other request will have.
inline std::string random_hex_128() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    auto bits = rng();
    for (int i = 0; i < 16; ++i) id[half * 16 + i] = hex_digits[(bits >> (i * 4)) & 0xf];
  }
  return id;
}

}  // namespace tokengate
