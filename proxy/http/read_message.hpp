#pragma once
// Reads message heads into our own parsers (http_head.hpp) and a chunked
// request body, parsing what is already buffered before reading more, with
// the errors Beast's reads gave (end_of_stream when nothing came,
// partial_message when the peer closed mid-message, header_limit and
// body_limit). When the bytes are already in the buffer (a request that
// arrived whole with the read that woke the session) they complete at once,
// without the round through the event loop (and the epoll_wait) that a
// composed operation's posted completion costs. Deadlines are the stream's
// (expires_after).
#include <boost/beast/core/flat_buffer.hpp>

#include "http/client_request.hpp"
#include "http/response_head.hpp"
#include "io/net.hpp"

namespace tokengate {

class any_stream;

// A head's bytes are consumed from `buffer`; what followed them (the body's
// start, or a pipelined request) stays there. A head longer than `limit`
// bytes is refused (http::error::header_limit), as is one of more than
// `max_fields` fields (the same error, `head.fields` then full).
net::awaitable<error_code> read_request_head(any_stream& stream, beast::flat_buffer& buffer,
                                             request_head& head, std::size_t limit,
                                             std::size_t max_fields);
// The final answer's head: interim answers before it (1xx: 100 Continue,
// 103 Early Hints) are read and passed over, as RFC 9110 §15.2 has a client
// do. Taken for the answer, one left the client waiting for the real one
// and left that one unread on a connection going back to the pool, where
// it would have answered the next request sent on it. A 101, or more than
// max_interim_answers of them, is refused (http::error::bad_status).
net::awaitable<error_code> read_response_head(any_stream& stream, beast::flat_buffer& buffer,
                                              response_head& head, std::size_t limit);

// A chunked request body (RFC 9112 §7.1), its payload appended to `body`:
// more than `limit` bytes of payload is refused (http::error::body_limit).
// What follows the body (a pipelined request) stays in `buffer`. The
// decoder is the one that undoes an upstream's chunks (http/
// body_decoder.hpp); it leaves at most a line's bytes (4 KiB) undecoded, so
// the buffer stays small whatever the body's size (http/chunked_body.hpp).
net::awaitable<error_code> read_chunked_body(any_stream& stream, beast::flat_buffer& buffer,
                                             body_bytes& body, std::size_t limit);
}  // namespace tokengate
