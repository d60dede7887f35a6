#pragma once
// The upstream's response head: its status line, then the fields as every
// head has them (http_head.hpp), parsed in one pass with no container per
// field. A hosted provider's head carries two dozen fields (rate limits,
// cookies, tracing), which Beast's parser took 29,000 instructions a
// request to fill into an http::fields, a third of the proxy's user-space
// work on a short request.
#include <string_view>

#include "http/message_head.hpp"

namespace tokengate {

// Interim (1xx) answers passed over before an answer, at most: an upstream
// sending them without end would hold the request until its deadline.
inline constexpr std::size_t max_interim_answers = 8;

struct response_head : message_head {
  unsigned status = 0;
  std::string_view reason;  // a view into `bytes`

  // 1xx, 204 and 304 answers have no body whatever their fields say
  // (RFC 9112 §6.3).
  bool ends_with_head() const { return status / 100 == 1 || status == 204 || status == 304; }
  // Nor has one with a Content-Length of 0.
  bool has_body() const { return !ends_with_head() && (!content_length || *content_length > 0); }
  // The body is delimited by the connection's close (a response framed
  // neither by a length nor by chunks, RFC 9112 §6.3).
  bool body_until_close() const { return has_body() && !chunked && !content_length; }
  // Whether the connection may carry another request after this answer.
  bool keep_alive() const {
    bool persistent = version >= 11 ? !connection_close : connection_keep_alive;
    return persistent && !body_until_close();
  }
  // The views go and their memory with them; the framing and the status stay.
  void release_fields();
};

// Parses the head at the start of `text` (an obs-fold is blanked in
// `text` itself, which is why it is writable). done: `used` is the head's
// length, and `out` holds it in its own copy; need_more: the head does not
// end within `text` (nothing in it is refused so far); failed: `ec` says
// why.
head_progress parse_response_head(std::span<char> text, response_head& out, std::size_t& used,
                                  error_code& ec);

}  // namespace tokengate
