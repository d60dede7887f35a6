#pragma once
// The client's request head: its request line, then the fields as every
// head has them (http_head.hpp), parsed in one pass with no container per
// field. The OpenAI SDK sends seventeen fields a request, which Beast's
// parser took 17,000 instructions to fill into an http::fields
// (callgrind), a quarter of the proxy's user-space work on a short
// request.
//
// Framing as RFC 9112 §6 has it for a request, which a proxy must hold to
// (request smuggling): a body is framed by Content-Length or by chunked
// alone, never both; a request with neither has none. Any other transfer
// coding is refused, as is Transfer-Encoding in HTTP/1.0, where it did not
// exist.
#include <boost/beast/http/verb.hpp>
#include <string_view>

#include "http/message_head.hpp"

namespace tokengate {

struct request_head : message_head {
  http::verb method = http::verb::unknown;  // (unknown for a method Beast does not name)
  std::string_view method_string, target;   // views into `bytes`

  bool has_body() const { return chunked || content_length.value_or(0) > 0; }
  // Whether the client's connection may carry another request after this
  // one's answer.
  bool keep_alive() const { return version >= 11 ? !connection_close : connection_keep_alive; }
  // The client asks to be told to send its body (RFC 9110 §10.1.1).
  bool expects_continue() const;
  // RFC 9112 §3.2: exactly one Host field in HTTP/1.1, at most one in
  // HTTP/1.0. (The proxy writes the upstream's own Host; two of them are
  // how a request is made to mean one host to one hop and another to the
  // next.)
  bool host_fields_allowed() const;
};

// Parses the head at the start of `text`, as parse_response_head does
// (http/response_head.hpp). Empty lines before the request line are
// skipped (RFC 9112 §2.2). More than `max_fields` fields are refused with
// http::error::header_limit, `out.fields` then holding `max_fields`.
head_progress parse_request_head(std::span<char> text, request_head& out, std::size_t& used,
                                 error_code& ec, std::size_t max_fields = max_head_fields);

}  // namespace tokengate
