#pragma once
// An HTTP/1.x message head as the bytes that go on the wire, written in one
// pass into one string: start line, every field in order, blank line.
//
// Beast's serializer offers the same bytes as a nested buffer sequence
// (start line, fields, chunk framing) whose iteration cost more than the
// write it fed (perf, short requests: about 3 % of the proxy's CPU in its
// iterators), and its composed write was most of relay.cpp's build time.
// A string goes to the kernel with the body pieces in one scatter write.
#include <boost/beast/http/message.hpp>
#include <string>

#include "io/net.hpp"

namespace tokengate {

std::string head_bytes(const http::request_header<>& head);
std::string head_bytes(const http::response_header<>& head);

// A head whose fields are chosen as they are written (the heads the proxy
// forwards), written straight into its bytes: no field container between
// the parsed head and the wire. Beast's fields cost an allocation, a name
// lookup and a tree insertion per field, and a forwarded request and its
// response passed through two such containers each (16 of the 66
// allocations of a short request, heaptrack).
class head_writer {
 public:
  // `fields_size`: about how many bytes the fields take, reserved at once.
  // `version`: 11 or 10 (HTTP/1.1, HTTP/1.0).
  head_writer(std::string_view method, std::string_view target, std::size_t fields_size,
              unsigned version = 11);
  head_writer(unsigned status, std::string_view reason, std::size_t fields_size,
              unsigned version = 11);

  void field(std::string_view name, std::string_view value);
  // Whole field lines, each ending in CRLF, as another head holds them.
  void lines(std::string_view lines) { out_ += lines; }
  // The head with its closing blank line.
  std::string finish() &&;

 private:
  std::string out_;
};

// The bytes a head's fields take on the wire (names, values, separators).
std::size_t fields_size(const http::fields& fields);

}  // namespace tokengate
