#include "stream/whole_translation.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/beast/http/error.hpp>

#include "http/body_decoder.hpp"
#include "http/json_response.hpp"
#include "io/write_all.hpp"
#include "stream/client_framing.hpp"
#include "stream/whole_usage.hpp"

namespace tokengate::stream {
namespace {

using clock = std::chrono::steady_clock;

body_decoder decoder_for(const response_head& head) {
  if (!head.has_body()) return body_decoder::none();
  if (head.chunked) return body_decoder::chunked();
  if (head.content_length) return body_decoder::with_length(*head.content_length);
  return body_decoder::until_close();
}

// The upstream's body, whole: its framing undone, at most
// max_translated_body bytes, each read within the idle timeout.
net::awaitable<error_code> read_whole_body(upstream::exchange_state& s, upstream::answer& a,
                                           std::string& body) {
  auto decoder = decoder_for(a.head);
  auto& buffer = a.buffer;
  auto& upstream = s.upstream->stream;
  error_code ec;
  bool ended = false;
  for (;;) {
    auto bytes = buffer.data();
    auto part = decoder.decode(std::span<char>(static_cast<char*>(bytes.data()), bytes.size()), ec);
    if (ec) co_return ec;
    body.append(static_cast<const char*>(bytes.data()) + part.begin, part.size);
    buffer.consume(part.used);
    if (decoder.done()) co_return error_code{};
    if (body.size() > max_translated_body) co_return make_error_code(http::error::body_limit);
    if (ended) {
      decoder.end_of_input(ec);
      co_return ec;
    }
    upstream.expires_at(std::min(a.deadline, clock::now() + a.settings->timeouts.idle));
    auto [read_ec, n] = co_await upstream.async_read_some(buffer.prepare(16 * 1024), use_tuple);
    upstream.expires_never();
    buffer.commit(n);
    if (read_ec == net::error::eof)
      ended = true;
    else if (read_ec)
      co_return read_ec;
  }
}

// The response cache's copy: the answer as the client reads it, whole and
// in its dialect (within the entry's bound).
void keep_copy(const upstream::exchange_plan& plan, const std::string& body) {
  if (!plan.copy || !plan.copy->usable) return;
  if (body.size() > plan.copy->limit) {
    *plan.copy = {{}, plan.copy->limit, false};
    return;
  }
  plan.copy->bytes = body;
}

}  // namespace

net::awaitable<bool> relay_whole_translated(upstream::exchange_state& s, upstream::answer& a,
                                            const upstream::exchange_plan& plan,
                                            const relay_env& env, bool client_keep_alive,
                                            answer_translator& translator) {
  auto& ctx = s.ctx;
  ctx.upstream_headers = clock::now();
  std::string body;
  auto ec = co_await read_whole_body(s, a, body);
  if (ctx.client_gone) co_return false;
  if (ec) {
    auto failure = upstream::upstream_error_for(ec, *a.settings, false);
    spdlog::warn("request {}: upstream {} answer not read whole: {}", ctx.request_id,
                 a.settings->name, ec.message());
    s.upstream->stream.close();
    s.finished = true;
    co_await send_error(s.client, std::move(failure), client_keep_alive, ctx);
    co_return false;
  }
  // The answer is read: the connection goes back to its pool.
  s.finished = true;
  if (a.head.keep_alive() && a.buffer.size() == 0)
    a.from->release(std::move(s.upstream));
  else
    s.upstream->stream.close();

  // The usage as the upstream counted it, before the body is rewritten.
  whole_usage usage;
  usage.feed(body);
  ctx.input_tokens = usage.input_tokens();
  ctx.output_tokens = usage.output_tokens();
  ctx.cached_tokens = usage.cached_tokens();
  ctx.cache_write_tokens = usage.cache_write_tokens();
  unsigned status = a.head.status;
  translator.whole(status, body);
  keep_copy(plan, body);
  a.head.status = status;
  if (status == 529) a.head.reason = "Overloaded";  // (not a code Beast knows)
  ctx.status = status;
  auto extra = plan.response_headers;
  extra.emplace_back("Content-Type", "application/json");
  auto head = client_head(a.head, extra, ctx, body.size(), false, client_keep_alive);
  std::array<net::const_buffer, 2> pieces{net::buffer(head), net::buffer(body)};
  s.client.expires_after(env.limits.client_write_timeout);
  auto [write_ec, n] = co_await write_all(s.client, pieces);
  s.client.expires_never();
  if (write_ec) {
    ctx.client_gone = true;
    co_return false;
  }
  ctx.bytes_to_client += n;
  env.metrics.downstream_bytes_sent.add(n);
  co_return client_keep_alive;
}

}  // namespace tokengate::stream
