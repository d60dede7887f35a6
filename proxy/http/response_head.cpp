#include "http/response_head.hpp"

namespace tokengate {
namespace {

using http::error;

// HTTP-version SP status-code SP reason-phrase CRLF, with Beast's errors.
head_progress status_line(head_scanner& scan, response_head& out) {
  constexpr std::string_view name = "HTTP/";
  const char* p = scan.at();
  auto have = scan.left();
  // (What came so far is refused at once if it cannot begin a response:
  // a broken upstream's bytes fail here, not at the head timeout.)
  if (std::string_view(p, std::min(have, name.size())) !=
      name.substr(0, std::min(have, name.size())))
    return scan.fail(error::bad_version);
  constexpr std::size_t through_status = 13;  // "HTTP/1.1 200 "
  if (have < through_status) return head_progress::need_more;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!digit(p[5]) || p[6] != '.' || !digit(p[7])) return scan.fail(error::bad_version);
  out.version = static_cast<unsigned>((p[5] - '0') * 10 + (p[7] - '0'));
  if (out.version != 10 && out.version != 11) return scan.fail(error::bad_version);
  if (p[8] != ' ') return scan.fail(error::bad_version);
  if (!digit(p[9]) || !digit(p[10]) || !digit(p[11]) || p[12] != ' ')
    return scan.fail(error::bad_status);
  out.status = static_cast<unsigned>((p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0'));
  scan.skip(through_status);
  const char* reason = scan.at();
  const char* last = nullptr;
  if (auto r = scan.rest_of_line(last, false, error::bad_reason); r != head_progress::done)
    return r;
  out.reason = std::string_view(reason, static_cast<std::size_t>(last - reason));
  return head_progress::done;
}

}  // namespace

void response_head::release_fields() {
  std::vector<field>().swap(fields);
  std::string().swap(bytes);
  reason = {};
  connection_option_count = 0;
  known_at = {};
}

head_progress parse_response_head(std::span<char> text, response_head& out, std::size_t& used,
                                  error_code& ec) {
  head_scanner scan(text, out, ec);
  if (auto r = status_line(scan, out); r != head_progress::done) return r;
  if (auto r = scan.fields_and_end(used); r != head_progress::done) return r;
  scan.keep_copy(used);
  out.reason = scan.moved(out.reason);
  return head_progress::done;
}

}  // namespace tokengate
