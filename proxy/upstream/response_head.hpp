#pragma once
// The upstream's response head, parsed in one pass over the bytes that
// brought it, with no container per field.
//
// Beast's parser fills an http::fields: an allocation, a name lookup and a
// tree insertion per field, about 1,100 instructions a field (callgrind). A
// hosted provider's head carries two dozen fields (rate limits, cookies,
// tracing): 29,000 instructions a request, against 3,100 for the demo
// engine's three fields, a third of the proxy's user-space work on a short
// request. The proxy reads few of the fields (the framing, the connection's
// fate, the content type) and forwards the rest as they came, so views into
// one copy of the head serve both.
//
// The grammar is RFC 9112's (§4 status line, §5 fields), and the errors are
// Beast's http::error codes, as before. Stricter than Beast where a proxy
// must be (request smuggling): Transfer-Encoding beside Content-Length is
// refused in either order, and so is `chunked` anywhere but last. Line
// folding (obs-fold) is accepted and each fold blanked to spaces, as RFC
// 9112 §5.2 lets a proxy do.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "net.hpp"

namespace tokengate::upstream {

struct response_head {
  struct field {
    std::string_view name, value;
    std::string_view line;  // the whole line as received, with its CRLF (what is forwarded)
  };
  unsigned version = 11;  // 10 or 11
  unsigned status = 0;
  std::string_view reason;
  std::vector<field> fields;  // in order; views into `bytes`
  std::optional<std::uint64_t> content_length;
  bool chunked = false;          // Transfer-Encoding ends with chunked
  bool connection_close = false;
  bool connection_keep_alive = false;
  // The Connection fields' other options: names of fields that belong to
  // the upstream's connection alone (RFC 9110 §7.6.1), never forwarded.
  // (keep-alive is not kept here: that field is hop-by-hop by its name.) A
  // head naming more than this many is refused.
  static constexpr std::size_t max_connection_options = 8;
  std::array<std::string_view, max_connection_options> connection_options;
  std::size_t connection_option_count = 0;
  std::span<const std::string_view> named_by_connection() const {
    return std::span(connection_options.data(), connection_option_count);
  }
  std::string bytes;  // the head as received (folds blanked), which the views point into

  // 1xx, 204 and 304 answers have no body whatever their fields say
  // (RFC 9112 §6.3).
  bool ends_with_head() const { return status / 100 == 1 || status == 204 || status == 304; }
  // Nor has one with a Content-Length of 0.
  bool has_body() const { return !ends_with_head() && (!content_length || *content_length > 0); }
  // The body is delimited by the connection's close.
  bool body_until_close() const { return has_body() && !chunked && !content_length; }
  // Whether the connection may carry another request after this answer.
  bool keep_alive() const {
    bool persistent = version >= 11 ? !connection_close : connection_keep_alive;
    return persistent && !body_until_close();
  }
  // The value of the first field of that name (case-blind), or empty.
  std::string_view value_of(std::string_view name) const;
  // The views go and their memory with them; the framing and the status stay.
  void release_fields();
};

enum class head_progress { done, need_more, failed };

// Parses the head at the start of `text` (an obs-fold is blanked in
// `text` itself, which is why it is writable). done: `used` is the head's
// length, and `out` holds it in its own copy; need_more: the head does not
// end within `text` (nothing in it is refused so far); failed: `ec` says
// why.
head_progress parse_response_head(std::span<char> text, response_head& out, std::size_t& used, error_code& ec);

}  // namespace tokengate::upstream
