#include "http/json_response.hpp"

#include <array>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <chrono>

#include "http/head_bytes.hpp"
#include "http/json_error.hpp"
#include "io/write_all.hpp"

namespace tokengate {
namespace {

net::awaitable<void> send_body(any_stream& client, http::status status, std::string body,
                               bool keep_alive, request_context& ctx,
                               const error_extras* extras = nullptr) {
  http::response<http::empty_body> res{status, 11};
  res.set(http::field::content_type, "application/json");
  if (extras)
    for (const auto& [name, value] : extras->headers) res.insert(name, value);
  res.set("x-request-id", ctx.request_id);
  res.content_length(body.size());
  res.keep_alive(keep_alive);
  ctx.status = res.result_int();
  const auto head = head_bytes(res.base());
  // An answer to HEAD is its head alone, with the length a GET's body
  // would have (RFC 9110 §9.3.2): a body there would be read as the start
  // of the connection's next answer.
  const bool head_alone = ctx.method == "HEAD";
  const std::array<net::const_buffer, 2> pieces{
      net::const_buffer(head.data(), head.size()),
      net::const_buffer(body.data(), head_alone ? 0 : body.size())};
  client.expires_after(std::chrono::seconds(10));
  auto [ec, n] = co_await write_all(client, pieces);
  if (ec) ctx.client_gone = true;
  ctx.bytes_to_client += n;
}

}  // namespace

net::awaitable<void> send_error(any_stream& client, request_error error, bool keep_alive,
                                request_context& ctx) {
  auto body = json_error_body(error.message, error.type, error.code);
  auto status = static_cast<http::status>(error.status);
  ctx.error = std::move(error);
  co_await send_body(client, status, std::move(body), keep_alive, ctx);
}

net::awaitable<void> send_error(any_stream& client, request_error error, bool keep_alive,
                                request_context& ctx, const error_extras& extras) {
  auto body = extras.anthropic_type.empty()
                  ? json_error_body(error.message, error.type, error.code)
                  : anthropic_error_body(error.message, extras.anthropic_type);
  auto status = static_cast<http::status>(error.status);
  ctx.error = std::move(error);
  co_await send_body(client, status, std::move(body), keep_alive, ctx, &extras);
}

net::awaitable<void> send_json(any_stream& client, std::string body, bool keep_alive,
                               request_context& ctx) {
  co_await send_body(client, http::status::ok, std::move(body), keep_alive, ctx);
}

}  // namespace tokengate
