// libFuzzer target: the upstream's response head, read by our parser and by
// Beast's, which read it before (http/response_head.hpp). Oracles:
// nothing crashes or reads past the input; a head we accept, Beast accepts
// too, with the same status, version, reason, fields (each name's values in
// order, compared where no fold was blanked), framing and keep-alive; a head we
// wait on, Beast does not call complete; a head only Beast accepts is one we
// refuse on purpose (framing two ways, `chunked` not last, more fields or
// Connection options than we keep), and a folded value over 4 KiB is one
// only we accept.
#include <algorithm>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"
#include "http/response_head.hpp"
#include "same_head.hpp"

using namespace tokengate;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);

  std::string ours_text = input;  // (our parser blanks folds in place)
  response_head head;
  std::size_t used = 0;
  error_code ours_ec;
  auto progress = parse_response_head(ours_text, head, used, ours_ec);

  http::response_parser<http::empty_body> beast;
  beast.eager(false);
  beast.header_limit(64 * 1024);
  beast.body_limit(boost::none);
  error_code beast_ec;
  auto beast_used = beast.put(boost::asio::buffer(input.data(), input.size()), beast_ec);
  bool beast_done = !beast_ec && beast.is_header_done();

  if (progress == head_progress::need_more) {
    check(!beast_done);
    return 0;
  }
  if (progress == head_progress::failed) {
    if (beast_done) {
      // Only where we are stricter on purpose.
      check(ours_ec == http::error::bad_transfer_encoding ||
            ours_ec == http::error::bad_content_length || ours_ec == http::error::header_limit ||
            ours_ec == http::error::bad_value);
    }
    return 0;
  }

  const bool folded = input.substr(0, used).find("\r\n ") != std::string::npos ||
                      input.substr(0, used).find("\r\n\t") != std::string::npos;
  // Beast joins a folded value in a buffer of 4 KiB and refuses a longer
  // one (header_limit); we blank folds in place, whatever the length.
  if (!beast_done && folded && beast_ec == http::error::header_limit) return 0;
  check(beast_done);
  check(used == beast_used);
  check(used <= input.size());
  check(head.bytes == std::string_view(ours_text).substr(0, used));
  const auto& message = beast.get();
  check(head.status == message.result_int());
  check(head.version == message.version());
  // (An empty reason Beast answers with the status's standard one.)
  if (!head.reason.empty()) check(head.reason == std::string_view(message.reason()));
  fuzz::check_same_head(head, beast, message, folded);
  return 0;
}
