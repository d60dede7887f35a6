#include "http/request_head.hpp"

#include <boost/beast/core/string.hpp>

#include "http/token.hpp"

namespace tokengate {
namespace {

using http::error;

// method SP request-target SP HTTP-version CRLF, with Beast's errors. A
// byte that cannot belong where it stands is refused as soon as it comes
// (a TLS handshake sent to a plain listener fails at its first byte, not
// at the head timeout).
head_progress request_line(head_scanner& scan, request_head& out) {
  const char* p = scan.at();
  const char* const end = p + scan.left();
  const char* q = p;
  while (q < end && http_token_chars[static_cast<unsigned char>(*q)]) ++q;
  if (q == end) return head_progress::need_more;
  if (q == p || *q != ' ') return scan.fail(error::bad_method);
  out.method_string = std::string_view(p, static_cast<std::size_t>(q - p));
  out.method = http::string_to_verb(out.method_string);
  const char* target = ++q;
  // (Visible ASCII and obs-text; RFC 3986's finer grammar is the
  // upstream's to judge, as it was under Beast.)
  while (q<end&& static_cast<unsigned char>(*q)> 0x20 && *q != 0x7f) ++q;
  if (q == end) return head_progress::need_more;
  if (q == target || *q != ' ') return scan.fail(error::bad_target);
  out.target = std::string_view(target, static_cast<std::size_t>(q - target));
  ++q;
  constexpr std::string_view version_then_crlf = "HTTP/1.1\r\n";
  auto have = std::min(static_cast<std::size_t>(end - q), version_then_crlf.size());
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  for (std::size_t i = 0; i < have; ++i) {
    bool ok = i == 5 || i == 7 ? digit(q[i]) : q[i] == version_then_crlf[i];
    if (!ok) return scan.fail(i >= 8 ? error::bad_line_ending : error::bad_version);
  }
  if (have < version_then_crlf.size()) return head_progress::need_more;
  out.version = static_cast<unsigned>((q[5] - '0') * 10 + (q[7] - '0'));
  if (out.version != 10 && out.version != 11) return scan.fail(error::bad_version);
  scan.skip(static_cast<std::size_t>(q + version_then_crlf.size() - scan.at()));
  return head_progress::done;
}

// RFC 9112 §6.1 and §6.3 for a request: chunked alone, and not in HTTP/1.0.
// (Beside Content-Length it was already refused, as in a response.)
bool framing_allowed(const request_head& head) {
  return !head.transfer_encoding || (head.version >= 11 && head.chunked && !head.other_codings);
}

}  // namespace

bool request_head::expects_continue() const {
  return boost::beast::iequals(value_of(known_field::expect), "100-continue");
}

bool request_head::host_fields_allowed() const {
  return version >= 11 ? host_fields == 1 : host_fields <= 1;
}

head_progress parse_request_head(std::span<char> text, request_head& out, std::size_t& used,
                                 error_code& ec, std::size_t max_fields) {
  head_scanner scan(text, out, ec, max_fields);
  while (scan.left() >= 2 && scan.at()[0] == '\r' && scan.at()[1] == '\n') scan.skip(2);
  if (scan.left() == 1 && scan.at()[0] == '\r') return head_progress::need_more;
  if (auto r = request_line(scan, out); r != head_progress::done) return r;
  // The fields are parsed once the head has come whole. A head often comes
  // in two reads (the first into the small buffer that watched the client
  // during the last response, io/client_watcher.hpp), and its fields
  // parsed at each read cost twice over (callgrind: 12,700 instructions a
  // request for the OpenAI SDK's head, against 8,800 with this).
  if (std::string_view(scan.at(), scan.left()).find("\r\n\r\n") == std::string_view::npos &&
      !std::string_view(scan.at(), scan.left()).starts_with("\r\n"))
    return head_progress::need_more;
  if (auto r = scan.fields_and_end(used); r != head_progress::done) return r;
  if (!framing_allowed(out)) return scan.fail(error::bad_transfer_encoding);
  scan.keep_copy(used);
  // The request is kept for its stream's life (a retry rebuilds the
  // upstream's request from it): the room reserved for a provider's two
  // dozen fields (1.5 KB) goes, for an allocation of the fields' size.
  out.fields.shrink_to_fit();
  out.method_string = scan.moved(out.method_string);
  out.target = scan.moved(out.target);
  return head_progress::done;
}

}  // namespace tokengate
