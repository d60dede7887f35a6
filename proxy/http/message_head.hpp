#pragma once
// What an HTTP/1.x message head's fields say, parsed in one pass over the
// bytes that brought it, with no container per field: the part that the
// upstream's response head (http/response_head.hpp) and the client's
// request head (http/request_head.hpp) share. Each has its own start line.
//
// Beast's parser fills an http::fields: an allocation, a name lookup and a
// tree insertion per field, about 1,100 instructions a field (callgrind).
// A hosted provider's response carries two dozen fields, the OpenAI SDK's
// request seventeen. The proxy reads few of them (the framing, the
// connection's fate, a credential) and forwards the rest as they came, so
// views into one copy of the head serve both.
//
// The grammar is RFC 9112 §5, and the errors are Beast's http::error codes.
// Stricter than Beast where a proxy must be (request smuggling):
// Transfer-Encoding beside Content-Length is refused in either order, and so
// is `chunked` anywhere but last, or a coding that is not a bare token. Line
// folding (obs-fold) is accepted and each fold blanked to spaces, as RFC
// 9112 §5.2 lets a proxy do.
#include <array>
#include <boost/beast/http/error.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/net.hpp"

namespace tokengate {

// The fields the proxy reads by name (besides the framing and Connection).
enum class known_field : std::uint8_t {
  authorization,
  x_api_key,
  x_request_id,
  expect,
  content_type
};
inline constexpr std::size_t known_field_count = 5;

struct message_head {
  // The views point into `bytes`: a copy's would point into the original's.
  // (A move keeps them: a head is longer than any string kept in place,
  // so its bytes stay where they are.)
  message_head() = default;
  message_head(const message_head&) = delete;
  message_head& operator=(const message_head&) = delete;
  message_head(message_head&&) = default;
  message_head& operator=(message_head&&) = default;

  struct field {
    std::string_view name, value;
    std::string_view line;  // the whole line as received, with its CRLF (what is forwarded)
  };
  unsigned version = 11;      // 10 or 11
  std::vector<field> fields;  // in order; views into `bytes`
  std::optional<std::uint64_t> content_length;
  bool transfer_encoding = false;  // a Transfer-Encoding field came
  bool chunked = false;            // ... and it ends with chunked
  bool other_codings = false;      // ... and names a coding other than chunked
  bool connection_close = false;
  bool connection_keep_alive = false;
  // The Connection fields' other options: names of fields that belong to
  // the sender's connection alone (RFC 9110 §7.6.1), never forwarded.
  // (keep-alive is not kept here: that field is hop-by-hop by its name.) A
  // head naming more than this many is refused.
  static constexpr std::size_t max_connection_options = 8;
  std::array<std::string_view, max_connection_options> connection_options;
  std::size_t connection_option_count = 0;
  std::span<const std::string_view> named_by_connection() const {
    return std::span(connection_options.data(), connection_option_count);
  }
  std::string bytes;  // the head as received (folds blanked), which the views point into
  // Where the first field of each known name is (1 + its index; 0: none),
  // noted as the head is parsed: a walk over the fields for each name the
  // proxy reads cost about 1,000 instructions a request (callgrind, the
  // OpenAI SDK's seventeen fields). (A head has at most 10,000 fields,
  // limits.max_header_count's ceiling.)
  std::array<std::uint16_t, known_field_count> known_at{};
  std::size_t host_fields = 0;  // how many Host fields came

  // The value of the first field of that name (case-blind), or empty.
  std::string_view value_of(std::string_view name) const;
  std::string_view value_of(known_field name) const {
    auto at = known_at[static_cast<std::size_t>(name)];
    return at ? fields[at - 1u].value : std::string_view();
  }
};

enum class head_progress { done, need_more, failed };

// More fields than any real head carries; a head of thousands of tiny
// fields would otherwise cost a view each.
inline constexpr std::size_t max_head_fields = 512;

// The walk over a head's bytes that both start lines and the fields share.
// The start line's parser (each head's own) steps over its line with
// rest_of_line; fields_and_end then parses the rest, and keep_copy moves
// the views onto the head's own copy.
class head_scanner {
 public:
  // `text` is writable: an obs-fold is blanked where it lies.
  head_scanner(std::span<char> text, message_head& out, error_code& ec,
               std::size_t max_fields = max_head_fields);

  const char* at() const { return p_; }
  std::size_t left() const { return static_cast<std::size_t>(end_ - p_); }
  void skip(std::size_t n) { p_ += n; }
  head_progress fail(http::error e);

  // From here to the line's CRLF: `last` ends at the CR, and the scan goes
  // on after the LF. HTAB passes; in a field value a fold (CRLF then a
  // blank) is blanked and the value goes on; any other control character
  // is refused (`refusal` names the error outside field values).
  head_progress rest_of_line(const char*& last, bool folds, http::error refusal);
  // The fields, each checked as it comes, and the blank line that ends the
  // head; `used` is then the head's length.
  head_progress fields_and_end(std::size_t& used);
  // Copies the head into `out.bytes` and moves every field view onto it;
  // `moved` then moves the start line's views.
  void keep_copy(std::size_t used);
  std::string_view moved(std::string_view v) const;

 private:
  head_progress field_line();
  bool note_field(std::string_view name, std::string_view value);
  bool content_length(std::string_view value);
  bool transfer_encoding(std::string_view value);
  bool connection(std::string_view value);
  bool refuse(http::error e);

  char* begin_;
  char* p_;
  char* end_;
  message_head& out_;
  error_code& ec_;
  std::size_t max_fields_;
};

}  // namespace tokengate
