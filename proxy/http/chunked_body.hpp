#pragma once
// A chunked request body's decoding step, apart from the reads
// (http/read_message.hpp) so that the fuzz target runs it as the session
// does.
#include <cstddef>
#include <span>

#include "http/body_decoder.hpp"
#include "http/client_request.hpp"
#include "io/net.hpp"

namespace tokengate {

// On what has arrived: the payload of the chunks in `bytes` appended to
// `body`; returns how many of the bytes were taken (the rest: a line not
// yet whole, or what follows the body). `ec`: http::error::body_limit past
// `limit` bytes of payload, or the decoder's error on malformed chunks.
std::size_t take_chunks(body_decoder& decoder, std::span<char> bytes, body_bytes& body,
                        std::size_t limit, error_code& ec);

}  // namespace tokengate
