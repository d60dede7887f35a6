#pragma once
// Complete answers that tokengate writes itself, with a JSON body: the
// OpenAI-style error body for every refusal and failure (http/json_error.hpp)
// and a 200 for what it serves on its own (GET /v1/models).
#include <string>
#include <utility>
#include <vector>

#include "http/request_context.hpp"
#include "http/request_error.hpp"
#include "io/any_stream.hpp"
#include "io/net.hpp"

namespace tokengate {

// Writes the error's status and body, and records it in `ctx` (the access
// log and the error metrics read it there).
net::awaitable<void> send_error(any_stream& client, request_error error, bool keep_alive,
                                request_context& ctx);

// What a refusal may add: headers (Retry-After, x-ratelimit-*), and
// Anthropic's body shape with `anthropic_type` as the error's type.
struct error_extras {
  std::vector<std::pair<std::string, std::string>> headers;
  std::string_view anthropic_type;  // empty: the OpenAI-style body
};
net::awaitable<void> send_error(any_stream& client, request_error error, bool keep_alive,
                                request_context& ctx, const error_extras& extras);

// Writes a 200 response with a JSON body.
net::awaitable<void> send_json(any_stream& client, std::string body, bool keep_alive,
                               request_context& ctx);

}  // namespace tokengate
