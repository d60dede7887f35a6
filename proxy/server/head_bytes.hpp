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

#include "net.hpp"

namespace tokengate {

std::string head_bytes(const http::request_header<>& head);
std::string head_bytes(const http::response_header<>& head);

}  // namespace tokengate
