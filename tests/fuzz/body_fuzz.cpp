// libFuzzer target: the relay's body decoder (http/body_decoder.hpp)
// against Beast's parser, the reference it replaced for response bodies.
// The input is a chunked body (after two bytes that choose where the reads
// are cut). Oracles: wherever Beast takes the whole body, the decoder, fed
// in pieces as the relay feeds it, takes it too, with the same payload and
// not one byte after it; where Beast finds the body unfinished, so does the
// decoder; payload offsets stay within each read. (The decoder may accept
// what Beast refuses only in what it passes over: chunk extensions and
// trailer fields.) Two differences are by design and kept out: quoted
// strings in chunk extensions (Beast lets one run on across a line's end;
// the decoder ends a line at its CRLF and refuses an unclosed quote; no
// engine sends extensions), so every '"' of the input is read as 'q'; and a
// line longer than the decoder's bound (4 KiB), which Beast would wait for,
// so inputs are kept under it.
#include <algorithm>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/body_decoder.hpp"

using namespace tokengate;

namespace {

struct reference {
  bool done = false, error = false;
  std::string payload;
  std::size_t used = 0;  // body bytes Beast took
};

reference beast_parse(std::string_view body) {
  static const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string wire = head + std::string(body);
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  parser.eager(true);
  reference r;
  error_code ec;
  std::size_t at = 0;
  while (at < wire.size() && !parser.is_done()) {
    auto used = parser.put(net::buffer(wire.data() + at, wire.size() - at), ec);
    at += used;
    if (ec == http::error::need_more) {
      ec = {};
      if (used == 0) break;
      continue;
    }
    if (ec) {
      r.error = true;
      return r;
    }
  }
  r.done = parser.is_done();
  r.payload = parser.get().body();
  r.used = at - head.size();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2 || size > body_decoder::max_line) return 0;
  const std::size_t step_a = data[0] % 64 + 1, step_b = data[1] % 7 + 1;
  std::string input(reinterpret_cast<const char*>(data + 2), size - 2);
  std::replace(input.begin(), input.end(), '"', 'q');
  std::string_view body(input);
  auto expected = beast_parse(body);

  auto decoder = body_decoder::chunked();
  std::string buffer, payload;
  std::size_t fed = 0, used = 0, turn = 0;
  error_code ec;
  while (fed < body.size() && !decoder.done() && !ec) {
    auto piece = std::min(body.size() - fed, turn++ % 2 ? step_b : step_a);
    buffer.append(body.substr(fed, piece));
    fed += piece;
    auto r = decoder.decode(std::span<char>(buffer.data(), buffer.size()), ec);
    if (ec) break;
    check(r.begin + r.size <= r.used && r.used <= buffer.size());
    payload.append(buffer, r.begin, r.size);
    buffer.erase(0, r.used);
    used += r.used;
  }
  if (expected.done) {
    check(!ec);
    check(decoder.done());
    check(payload == expected.payload);
    check(used == expected.used);
  } else if (!expected.error) {
    check(!decoder.done());  // Beast wants more: so must the decoder
  }
  return 0;
}
