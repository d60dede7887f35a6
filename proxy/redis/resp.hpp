#pragma once
// RESP2, the Redis protocol: commands as arrays of bulk strings, replies
// read incrementally from whatever bytes have arrived. A reply that breaks
// the grammar or its bounds (a bulk string over 16 MB, an array over a
// million elements or nested past 8) is a protocol_error: the connection
// is closed, never a buffer grown without end.
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tokengate::redis {

// The largest bulk string a reply may carry.
inline constexpr long long max_bulk_bytes = 16LL << 20;

struct reply {
  enum class type { simple, error, integer, bulk, nil, array };
  type kind = type::nil;
  std::string text;  // simple, error, bulk
  long long integer = 0;
  std::vector<reply> elements;

  bool is_error() const { return kind == type::error; }
  // The element at `i` as an integer (integer, or bulk text of digits);
  // nullopt otherwise.
  std::optional<long long> integer_at(std::size_t i) const;
};

class protocol_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Appends `*N\r\n$len\r\narg\r\n...` for one command.
void append_command(std::string& out, const std::vector<std::string>& args);

// One reply from the start of `data`: nullopt while it is incomplete;
// `consumed` is set to its length when complete. Throws protocol_error.
std::optional<reply> parse_reply(std::string_view data, std::size_t& consumed);

}  // namespace tokengate::redis
