#pragma once
// Reads an HTTP message head (or a whole message) into a Beast parser,
// parsing what is already buffered before reading more, as Beast's
// http::async_read_header / http::async_read do, with the same errors
// (end_of_stream when nothing came, partial_message when the peer closed
// mid-message, the parser's own header and body limits). The difference:
// when the bytes are already in the buffer (a request that arrived whole
// with the read that woke the session), it completes at once, without the
// round through the event loop (and the epoll_wait) that a composed
// operation's posted completion costs, and without a composed operation's
// code in every file that reads a message.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>

#include "net.hpp"
#include "upstream/response_head.hpp"

namespace tokengate {

class any_stream;

// `whole`: until the message is complete; otherwise until its head is.
// Deadlines are the stream's (expires_after).
template <bool isRequest>
net::awaitable<error_code> read_message(any_stream& stream, beast::flat_buffer& buffer,
                                        http::basic_parser<isRequest>& parser, bool whole);

extern template net::awaitable<error_code> read_message<true>(any_stream&, beast::flat_buffer&,
                                                              http::basic_parser<true>&, bool);
extern template net::awaitable<error_code> read_message<false>(any_stream&, beast::flat_buffer&,
                                                               http::basic_parser<false>&, bool);

// The upstream's response head, read the same way into our own parser
// (upstream/response_head.hpp): its bytes are consumed from `buffer`, what
// followed them (the body's start) stays there. A head longer than `limit`
// bytes is refused (http::error::header_limit).
net::awaitable<error_code> read_response_head(any_stream& stream, beast::flat_buffer& buffer,
                                              upstream::response_head& head, std::size_t limit);

}  // namespace tokengate
