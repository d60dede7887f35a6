#pragma once
// An upstream response's body framing (a length, HTTP/1.1 chunks, or "until
// the connection closes"), undone where the bytes were read.
//
// The relay used to hand each read to Beast's parser, which copied the
// payload into a buffer of its own: a second per-stream buffer touched by
// every event (cold at thousands of streams), a copy, and the parser's
// per-chunk callbacks. Here the payload stays in the read buffer: a read
// that holds one chunk (an engine writes each event as one) yields its
// payload where it lies; the payloads of several chunks are moved together
// behind the first, so that the relay still sees one run of bytes per read
// and sends it in one write. Beast still parses the head.
#include <cstddef>
#include <cstdint>
#include <span>

#include "io/net.hpp"

namespace tokengate {

class body_decoder {
 public:
  // What the head said about the body.
  static body_decoder with_length(std::uint64_t length);
  static body_decoder chunked();
  static body_decoder until_close();
  static body_decoder none();  // 204, 304, a length of 0: already complete

  // The payload of one decode: bytes [begin, begin + size) of the span
  // given. `used` bytes of it were taken (framing included); the rest (an
  // incomplete size line, or bytes after the body) must be given again,
  // with more after them, at the next decode. The payload is only valid
  // until then.
  struct result {
    std::size_t begin = 0;
    std::size_t size = 0;
    std::size_t used = 0;
  };
  // Decodes `bytes` in place (payloads move within it). On malformed
  // framing `ec` is set and the decoder is of no further use.
  result decode(std::span<char> bytes, error_code& ec);
  // The connection closed: the end of a body that runs to the close, an
  // error (http::error::partial_message) for any other unfinished body.
  void end_of_input(error_code& ec);

  bool done() const { return state_ == state::done; }

  // Longest size line or trailer line accepted: the bytes of an incomplete
  // one are held until it ends.
  static constexpr std::size_t max_line = 4096;

 private:
  enum class state { length, until_close, size_line, payload, payload_end, trailers, done };
  explicit body_decoder(state s, std::uint64_t left = 0) : state_(s), left_(left) {}

  // One decode's position in the bytes in hand (body_decoder.cpp). Each
  // step below decodes what its state expects; false: wait for more bytes
  // (or `ec` says the framing is bad).
  struct cursor;
  void take_counted(cursor& c);
  bool read_size_line(cursor& c);
  bool read_payload_end(cursor& c);
  bool read_trailer(cursor& c);

  state state_;
  std::uint64_t left_;  // payload bytes still to come (length, payload)
};

}  // namespace tokengate
