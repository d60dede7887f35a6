#include "stream/relay.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <span>
#include <tuple>
#include <utility>

#include "server/any_stream.hpp"
#include "server/client_watcher.hpp"
#include "server/drained_read.hpp"
#include "server/head_bytes.hpp"
#include "server/headers.hpp"
#include "server/json_error.hpp"
#include "server/read_message.hpp"
#include "server/upstream_request.hpp"
#include "server/write_all.hpp"
#include "server/request_context.hpp"
#include "server/worker.hpp"
#include "stream/error_event.hpp"
#include "stream/final_event.hpp"
#include "stream/observer.hpp"
#include "stream/accounting.hpp"
#include "stream/body_decoder.hpp"
#include "stream/event_aligner.hpp"
#include "stream/sse_parser.hpp"
#include "upstream/response_head.hpp"

// GCC 12 takes Asio's coroutine frames, allocated by awaitable_frame_base's
// operator new (through the thread's recycling cache) and freed by its sized
// operator delete, for a mismatched pair once both are inlined into the
// relay's coroutine: a false positive of GCC's with class-specific
// allocation of coroutine frames (GCC bug 109224 is the same pattern). It
// was the build's one warning.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace tokengate {
namespace {

// For the relay's upstream reads, one per event: awaited as a deferred
// operation, a read resumes this coroutine from its completion handler,
// where use_awaitable wraps it in a coroutine frame of its own (allocated,
// entered, left and freed per read).
constexpr auto deferred_tuple = net::as_tuple(net::deferred);

// One request's exchange; the client watcher (server/client_watcher.hpp)
// runs beside it on the same thread and calls client_gone.
struct exchange_state final : client_gone_hook {
  exchange_state(any_stream& c, request_context& context, worker& wk) : client(c), ctx(context), w(wk) {}

  any_stream& client;
  request_context& ctx;
  worker& w;
  std::unique_ptr<upstream::connection> upstream;
  bool finished = false;  // the exchange is over: the watcher must stop

  // Close the upstream now, so that the engine stops generating. Not once
  // the exchange is over: the connection may be back in the pool.
  void client_gone() override {
    if (finished) return;
    ctx.client_gone = true;
    if (upstream) upstream->stream.close();
  }
};

config::duration until(clock::time_point deadline, config::duration phase_limit) {
  auto left = std::chrono::duration_cast<config::duration>(deadline - clock::now());
  if (left < config::duration(1)) left = config::duration(1);
  return std::min(left, phase_limit);
}

// A write to the client failed: it is gone, and so must the upstream be, so
// that the engine stops generating.
void client_write_failed(exchange_state& s) {
  s.ctx.client_gone = true;
  if (s.upstream) s.upstream->stream.close();
}

void count_sent_to_client(exchange_state& s, std::size_t n) {
  s.ctx.bytes_to_client += n;
  s.w.metrics().downstream_bytes_sent.add(n);
}

// A client write; on failure the client is treated as gone. Its deadline is
// `timeout` from now. (The pieces must outlive the write: the caller awaits it.)
net::awaitable<bool> write_client(exchange_state& s, std::span<const net::const_buffer> buffers,
                                  config::duration timeout) {
  if (net::buffer_size(buffers) == 0) co_return true;  // (an empty HTTP chunk would end the body)
  // The deadline covers the watcher's pending read too, which is as it
  // should be (a client that takes no write in time is gone), but only for
  // as long as the write lasts.
  s.client.expires_after(timeout);
  auto [ec, n] = co_await net::async_write(s.client, buffers, use_tuple);
  s.client.expires_never();
  if (ec) {
    client_write_failed(s);
    co_return false;
  }
  count_sent_to_client(s, n);
  co_return true;
}

// The size line of an HTTP chunk of `size` bytes, written into `line`.
using chunk_line = std::array<char, 24>;
net::const_buffer chunk_size_line(std::size_t size, chunk_line& line) {
  auto end = std::to_chars(line.data(), line.data() + 16, size, 16).ptr;
  *end++ = '\r';
  *end++ = '\n';
  return {line.data(), static_cast<std::size_t>(end - line.data())};
}

// Bytes framed as one HTTP chunk: size line, bytes, CRLF. `line` holds the
// size line and must outlive the pieces.
std::array<net::const_buffer, 3> as_chunk(std::string_view bytes, chunk_line& line) {
  return {chunk_size_line(bytes.size(), line), net::const_buffer(bytes.data(), bytes.size()),
          net::const_buffer("\r\n", 2)};
}
const net::const_buffer last_chunk("0\r\n\r\n", 5);

// The end of a chunked body after the events: `tail` as one chunk, then
// the last chunk. (An empty chunk would be the last chunk itself.)
net::awaitable<bool> write_last_chunks(exchange_state& s, std::string_view tail, config::duration timeout) {
  chunk_line line;
  auto chunk = as_chunk(tail, line);
  if (!tail.empty() && !co_await write_client(s, chunk, timeout)) co_return false;
  co_return co_await write_client(s, std::span<const net::const_buffer>(&last_chunk, 1), timeout);
}

struct upstream_failure {
  unsigned status;
  const char* code;
  std::string message;
};

// Passive health: a connect error, timeout or 5xx counts against the
// upstream; the failure that ejects it is counted and logged once.
void note_upstream_failure(exchange_state& s, const config::upstream& u, const config::config& policy) {
  if (!s.w.health().record_failure(u.name, policy.health, clock::now())) return;
  s.w.metrics().upstream_ejections.add();
  spdlog::warn("upstream '{}' ejected for {} ms after {} consecutive failures (this worker)", u.name,
               std::chrono::duration_cast<std::chrono::milliseconds>(policy.health.cooldown).count(),
               policy.health.eject_after);
}

upstream_failure describe_upstream_error(const error_code& ec, const config::upstream& u, bool waiting_first_byte) {
  if (ec == beast::error::timeout) {
    if (waiting_first_byte)
      return {504, "upstream_timeout",
              "upstream '" + u.name + "' sent no response within " + std::to_string(u.timeouts.first_byte.count()) +
                  " ms"};
    return {504, "upstream_timeout", "upstream '" + u.name + "' stalled"};
  }
  if (ec == http::error::bad_status)  // (also a 101, or interim answers without end: read_message.hpp)
    return {502, "upstream_error", "upstream '" + u.name + "' sent a status the proxy cannot relay"};
  return {502, "upstream_error", "upstream '" + u.name + "' failed: " + ec.message()};
}

struct relay_context {
  exchange_state& s;
  upstream::pool& pool;
  const config::upstream& settings;
  const exchange_plan& plan;
  clock::time_point deadline;
  bool client_keep_alive;
  unsigned client_http_version;
};

// The client's head: the upstream's status and end-to-end fields, then
// ours (the plan's, the streaming ones, the framing), which replace any the
// upstream sent of the same name. (A plain function: the fields are not kept
// in the relay's frame.)
std::string client_head(const upstream::response_head& head, const exchange_plan& plan, const request_context& ctx,
                        const std::optional<std::uint64_t>& content_length, bool chunked, bool keep_alive) {
  auto status = http::int_to_status(head.status);
  // (A code of the upstream's own keeps its own reason phrase.)
  std::string_view reason =
      status == http::status::unknown ? head.reason : std::string_view(http::obsolete_reason(status));
  head_writer out(head.status, reason, head.bytes.size() + 160);
  static constexpr std::array<std::string_view, 2> streaming_fields{"Cache-Control", "X-Accel-Buffering"};
  forward_response_headers(head, out, ctx.request_id, plan.response_headers,
                           ctx.streamed ? std::span<const std::string_view>(streaming_fields) : std::span<const std::string_view>());
  if (ctx.streamed) {
    out.field("Cache-Control", "no-cache");
    out.field("X-Accel-Buffering", "no");  // tells an nginx in front not to buffer either
  }
  if (content_length) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, *content_length).ptr;
    out.field("Content-Length", std::string_view(digits, static_cast<std::size_t>(end - digits)));
  } else if (chunked) {
    out.field("Transfer-Encoding", "chunked");
  }
  if (!keep_alive) out.field("Connection", "close");
  return std::move(out).finish();
}

// The head was read with room for a provider's (4 KiB); a stream keeps its
// buffer for its whole life, and a slow one's should stay at the 512 bytes
// its events need: 9,000 streams held 18.4 KB each instead of 15.2 (scenario
// 3). What the head's read left moves into a buffer of its own size, at
// least 512 bytes (an allocation a request); a fast stream's grows again
// as its reads find more waiting.
void keep_small(beast::flat_buffer& buffer) {
  constexpr std::size_t small = 512;
  const std::size_t needed = std::max(small, buffer.size());
  if (buffer.capacity() <= needed) return;
  beast::flat_buffer kept;
  kept.reserve(needed);
  kept.commit(net::buffer_copy(kept.prepare(buffer.size()), buffer.data()));
  buffer = std::move(kept);
}

// Relays the upstream response whose head has been read.
net::awaitable<bool> relay_response(relay_context& r, upstream::response_head& head, beast::flat_buffer& head_buffer) {
  // What every event's turn reads is kept in this frame: with thousands of
  // streams open the caller's frame is out of the cache by the next event,
  // and each event missed on it (perf, 9,000 streams). The caller uses
  // neither after this.
  beast::flat_buffer up_buffer = std::move(head_buffer);
  keep_small(up_buffer);
  const auto total_deadline = r.deadline;
  const auto idle_timeout = r.settings.timeouts.idle;
  auto& s = r.s;
  auto& ctx = s.ctx;
  const auto& limits = s.w.config().limits;
  ctx.upstream_headers = clock::now();
  ctx.streamed = head.value_of(known_field::content_type).starts_with("text/event-stream");
  // A 204 or 304 answer ends with its head, and so does the client's (1xx
  // ones were passed over, read_response_head):
  // no framing field (RFC 9110 §8.6 forbids a length on a 204, and chunked
  // framing there would make our last chunk the start of the client's next
  // answer).
  const bool head_only = head.ends_with_head();
  auto content_length = head_only ? std::nullopt : head.content_length;
  // Without a length the client gets chunked framing; HTTP/1.0 clients get a
  // close-delimited body instead.
  bool chunked = !head_only && !content_length && r.client_http_version >= 11;
  bool client_keep_alive = r.client_keep_alive && (head_only || content_length || chunked);

  ctx.status = head.status;
  // The client's head leaves with the first events when the read that
  // brought the upstream's head brought them too (the usual case: one
  // write, as nginx does, where there were two), else on its own before
  // the relay waits for the body.
  auto head_text = client_head(head, r.plan, ctx, content_length, chunked, client_keep_alive);
  bool head_pending = true;
  // The upstream's head is read no more: its fields go back now rather than
  // at the end of the stream (what is kept of it, its framing and
  // keep-alive, is apart from them).
  head.release_fields();
  std::vector<net::const_buffer> pieces, framed, rest;
  // From here each side's deadline is set around each wait on it: the
  // upstream's read must bring a byte within the idle timeout, a client's
  // write that the kernel did not take at once must end within the write
  // timeout. Setting one stores a time point; the connection's one timer
  // (stream_deadline.hpp) is armed again only when it is due later than
  // the new deadline: on the client's side not (it was armed for the
  // request's head, sooner), on the upstream's only where nothing sooner
  // was pending (a new connection: armed for its first byte, 120 s by
  // default, later than the idle gap). A timer of the relay's own cost an
  // allocation, a timer-heap insertion and, at the stream's end, a
  // cancelled wait that Asio queued as a handler, and so a zero-timeout
  // epoll_wait, per stream.
  s.client.expires_never();
  s.upstream->stream.expires_never();

  stream::sse_parser sse;
  auto& series = s.w.latency().series_for(ctx.route, ctx.model_label, r.settings.name);
  auto& windows = s.w.latency().windows_for(ctx.route);
  // The limit is only enforced where cutting leaves a well-formed stream.
  stream::stream_accounting accounting(ctx, sse, ctx.streamed && chunked ? r.plan.output_limit : std::nullopt, series, windows);
  stream::event_aligner aligner;
  bool cut_mid_event = false;
  if (ctx.streamed) s.w.metrics().stream_active.add();
  pieces.reserve(4);
  framed.reserve(8);
  chunk_line chunk_header;
  error_code failure;
  // The pieces of one write, framed as one HTTP chunk when the client gets
  // chunked encoding. The chunk header is written here and the sequence is
  // passed as a span: Asio and Beast copy a buffer sequence several times per
  // write, and Beast's make_chunk(vector) cost seven mallocs per event
  // (heaptrack: 11.5 allocations per event before, 4.6 after the span).
  // The client's head goes in front of the first write, and the last chunk
  // after the write that ends the body when it is known to (`ends_body`).
  bool last_chunk_sent = false;
  auto frame = [&](const std::vector<net::const_buffer>& what, bool ends_body = false) -> std::span<const net::const_buffer> {
    auto size = net::buffer_size(what);
    framed.clear();
    if (head_pending) {
      framed.emplace_back(head_text.data(), head_text.size());
      head_pending = false;
    }
    if (chunked && size > 0) framed.push_back(chunk_size_line(size, chunk_header));
    framed.insert(framed.end(), what.begin(), what.end());
    if (chunked && size > 0) framed.emplace_back("\r\n", 2);
    if (chunked && ends_body) {
      framed.push_back(last_chunk);
      last_chunk_sent = true;
    }
    return framed;
  };
  // The head on its own, before anything else is written or awaited.
  auto head_alone = [&]() -> std::span<const net::const_buffer> {
    if (!head_pending) return {};
    pieces.clear();
    return frame(pieces);
  };
  // An event's write: handed to the kernel at once when the client's socket
  // takes it all, the usual case (no asynchronous operation, no suspension;
  // not a coroutine either: no frame per event). True when nothing is left
  // to send, or when the client is gone (ctx.client_gone); false leaves the
  // unsent part in `rest`, for write_client.
  auto sent_at_once = [&](std::span<const net::const_buffer> out) {
    auto total = net::buffer_size(out);
    if (total == 0) return true;
    error_code ec;
    auto n = s.client.send_now(out, ec);
    if (ec) {
      client_write_failed(s);
      return true;
    }
    count_sent_to_client(s, n);
    if (n == total) return true;
    unsent_part(out, n, rest);
    return false;
  };
  bool waited_for_client = false;  // since the last read: its time stamp may be long past
  auto send_rest = [&]() {
    waited_for_client = true;
    return write_client(s, rest, limits.client_write_timeout);
  };
  // The body's framing (chunks, a length, or up to the close) is undone in
  // the read buffer itself (stream/body_decoder.hpp): no second buffer, no
  // copy. Read and decode here rather than through http::async_read_some:
  // Beast's composed read costs more than the read itself, and it stops
  // after one HTTP chunk where we want every chunk already received, so
  // that events the upstream sent in separate chunks leave in one write
  // (one syscall per batch, as nginx does).
  auto body = !head.has_body() ? stream::body_decoder::none()
              : head.chunked     ? stream::body_decoder::chunked()
              : content_length   ? stream::body_decoder::with_length(*content_length)
                                 : stream::body_decoder::until_close();
  auto in_hand = [&] {
    auto bytes = up_buffer.data();
    return std::span<char>(static_cast<char*>(bytes.data()), bytes.size());
  };
  auto& upstream = s.upstream->stream;
  std::optional<drained_reader> plain_upstream;  // (TLS reads go through the TLS engine)
  if (!upstream.is_tls()) plain_upstream.emplace(upstream.socket(), upstream.reactor());
  bool upstream_ended = false;  // EOF seen: the decoder hears of it once the bytes in hand are decoded
  // The time of the last read's return, taken once per read for the
  // chunk's time in the accounting, the relay delay's window and the next
  // read's idle deadline. The clock is read again for the deadline only
  // after a wait for the client (a slow client's write may have taken
  // seconds): reading it costs about 3 % of the relay's user time per
  // read on a virtual machine's clock (perf), nginx reads it once per
  // turn of its event loop.
  auto now = clock::now();
  // How long the bytes about to be written have waited in the proxy: from
  // the kernel's arrival stamp of the last read's newest bytes to that
  // read's return (`now`; the work between it and the write, under a
  // microsecond per event, is left out rather than paid for with another
  // clock read per event). What the client's socket takes then is its own pace.
  auto note_relay_delay = [&] {
    auto arrival_ns = plain_upstream ? plain_upstream->last_arrival_ns() : 0;
    if (arrival_ns == 0) return;
    auto real_now_ns = s.w.realtime().real_ns_at(now);
    if (real_now_ns < arrival_ns) return;  // the clock stepped back
    auto micros = static_cast<std::uint64_t>((real_now_ns - arrival_ns) / 1000);
    series.relay_delay.record_micros(micros);
    windows.relay_delay.record(micros, now);
  };
  // The read buffer's bytes decoded by the last turn: their write is done by
  // the next turn, which lets them go.
  std::size_t decoded = 0;
  bool grow_before_next_read = false;
  while (!body.done()) {
    up_buffer.consume(decoded);
    decoded = 0;
    if (!head_pending && head_text.capacity() > 0) std::string().swap(head_text);  // written: its bytes go back
    error_code ec;
    auto part = body.decode(in_hand(), ec);
    if (!ec && part.size == 0 && !body.done()) {
      up_buffer.consume(part.used);  // framing only
      part = stream::body_decoder::result();
      if (upstream_ended) {
        body.end_of_input(ec);  // the end of a body that runs to the close; an error anywhere else
      } else {
        if (head_pending) {  // the head came without events: it goes now, before the wait
          if (!sent_at_once(head_alone()) && !co_await send_rest()) break;
          if (ctx.client_gone) break;
        }
        if (grow_before_next_read) {
          // The last read left bytes waiting in the kernel (TCP_INQ; through
          // TLS: it filled all the room it had): the upstream is ahead of
          // us, so grow the buffer and catch up in few reads (with 515-byte
          // reads a loaded proxy made 1.6x nginx's syscalls per event; nginx
          // reads 4 KiB). 16x at once, 512 B -> 8 KiB: a 20-token answer
          // takes 1.7 syscalls fewer than growing 4x at a time. A slow
          // stream's reads leave nothing behind, so its buffer stays small
          // whatever the size of its events. Grown here, when another read
          // follows, not on the read that brought the stream's last events:
          // every stream of a burst grew it as it ended, an allocation in
          // the burst's busiest second.
          up_buffer.reserve(std::min(16 * up_buffer.capacity(), limits.stream_buffer_bytes));
          grow_before_next_read = false;
        }
        // Beast's sizing: the buffer's free room, at least 512 bytes.
        auto room = std::max<std::size_t>(512, up_buffer.capacity() - up_buffer.size());
        if (std::exchange(waited_for_client, false)) now = clock::now();
        auto into = up_buffer.prepare(room);
        error_code rec;
        std::size_t n = 0;
        if (plain_upstream ? !plain_upstream->read_now(into, rec, n) : !upstream.read_now(into, rec, n)) {
          upstream.expires_at(std::min(total_deadline, now + idle_timeout));
          if (plain_upstream) std::tie(rec, n) = co_await plain_upstream->async_read_some(into, deferred_tuple);
          else std::tie(rec, n) = co_await upstream.async_read_some(into, deferred_tuple);
          upstream.expires_never();  // (while the client is written to, the upstream may wait)
        }
        now = clock::now();
        up_buffer.commit(n);
        bool upstream_ahead = plain_upstream ? plain_upstream->last_queued() > 0 : n == room;
        grow_before_next_read = upstream_ahead && up_buffer.capacity() < limits.stream_buffer_bytes;
        if (rec == net::error::eof) upstream_ended = true;
        else if (rec && upstream.timed_out()) ec = beast::error::timeout;  // (plain reads are not wrapped)
        else ec = rec;
        if (!ec) part = body.decode(in_hand(), ec);
      }
    }
    decoded = part.used;
    std::size_t got = part.size;
    if (got > 0) {
      std::string_view bytes(static_cast<const char*>(up_buffer.data().data()) + part.begin, got);
      if (ctx.streamed) {
        auto chunk_at = sse.fed();
        accounting.begin_chunk(now);
        bool had_token = ctx.content_events > 0;
        sse.feed(bytes, accounting);
        auto upto = accounting.cut() ? accounting.cut_at() : sse.boundary();
        cut_mid_event = accounting.cut() && upto < aligner.forwarded();
        aligner.plan(bytes, chunk_at, std::max(upto, aligner.forwarded()), accounting.drops(), pieces);
        note_relay_delay();
        // The body ended in this read on an event's end, after events: the
        // last chunk goes with them (one write fewer per stream); the checks
        // after the loop would find nothing more to send.
        bool ends_body = body.done() && !accounting.cut() && sse.boundary() == sse.fed() &&
                         sse.events_dispatched() > 0;
        if (!sent_at_once(frame(pieces, ends_body)) && !co_await send_rest()) break;
        if (ctx.client_gone) break;
        if (!had_token && ctx.content_events > 0) ctx.first_token_written = clock::now();
        if (accounting.cut()) break;
        aligner.keep_rest(bytes, chunk_at);
        if (aligner.holding_too_much()) {
          // One huge event (vLLM once sent the whole prompt's token ids):
          // forward it as it comes rather than hold megabytes.
          aligner.plan(bytes, chunk_at, chunk_at + got, accounting.drops(), pieces);
          if (!sent_at_once(frame(pieces)) && !co_await send_rest()) break;
          if (ctx.client_gone) break;
          aligner.keep_rest(bytes, chunk_at);
        }
      } else {
        pieces.assign(1, net::const_buffer(bytes.data(), bytes.size()));
        if (!sent_at_once(frame(pieces, body.done())) && !co_await send_rest()) break;
      }
    }
    if (ctx.client_gone) break;
    if (ec) {
      failure = ec;
      break;
    }
  }
  if (ctx.streamed) s.w.metrics().stream_active.sub();
  s.w.metrics().stream_events_total.add(ctx.sse_events);
  const auto& facts = accounting.facts();
  ctx.input_tokens = facts.input_tokens;
  ctx.output_tokens = accounting.output_tokens();
  if (ctx.client_gone) co_return false;
  if (head_pending) {  // no body came (or none that was written): the head still goes first
    if (!sent_at_once(head_alone()) && !co_await send_rest()) co_return false;
    if (ctx.client_gone) co_return false;
  }

  if (accounting.cut()) {
    // The upstream went past the limit: end the stream as the engine should
    // have, and stop the generation.
    ctx.limit_enforced = true;
    s.w.metrics().limit_enforced.add();
    s.upstream->stream.close();
    s.upstream.reset();
    auto tail = stream::make_limit_final_events(ctx.dialect, *r.plan.output_limit);
    if (cut_mid_event) tail.insert(0, "\n\n");  // end the half-sent event first
    if (!co_await write_last_chunks(s, tail, limits.client_write_timeout)) co_return false;
    co_return client_keep_alive;
  }

  if (!failure) {
    if (ctx.streamed && aligner.forwarded() < sse.fed()) {
      // The body ended inside an event: pass the tail on as it was sent (a
      // client discards an unfinished event, as the spec says).
      aligner.plan({}, sse.fed(), sse.fed(), accounting.drops(), pieces);
      if (!sent_at_once(frame(pieces)) && !co_await send_rest()) co_return false;
      if (ctx.client_gone) co_return false;
    }
    if (ctx.streamed && sse.fed() > 0 && sse.events_dispatched() == 0) {
      // Bytes, but not one event: whatever the upstream sent, it was not an
      // event stream. Passed on as it came, then said plainly, and counted
      // as a failed stream rather than a success.
      ctx.upstream_failed_midstream = true;
      s.w.metrics().downstream_rq_stream_failed.add();
      ctx.error = "upstream '" + r.settings.name + "' sent a body that is not an event stream";
      spdlog::warn("request {}: {}", ctx.request_id, ctx.error);
      s.upstream->stream.close();
      if (!chunked) co_return false;
      std::string tail = "\n\n" + stream::make_error_event(ctx.dialect, "upstream_error", "upstream_invalid_stream", ctx.error);
      if (!co_await write_last_chunks(s, tail, limits.client_write_timeout)) co_return false;
      s.finished = true;
      co_return client_keep_alive;
    }
    if (chunked && !last_chunk_sent) {
      if (!sent_at_once(std::span<const net::const_buffer>(&last_chunk, 1)) && !co_await send_rest()) co_return false;
      if (ctx.client_gone) co_return false;
    }
    s.finished = true;  // from here on the watcher must not touch the connection
    // Bytes past the answer's end: the upstream and the proxy disagree on
    // where it ended (a wrong length, or an answer smuggled after it), and
    // whatever they are must not answer the connection's next request.
    if (up_buffer.size() > decoded) {
      spdlog::warn("request {}: upstream '{}' sent {} bytes past the end of its answer; its connection is closed",
                   ctx.request_id, r.settings.name, up_buffer.size() - decoded);
      s.upstream->stream.close();
    } else if (head.keep_alive()) {
      r.pool.release(std::move(s.upstream));
    }
    co_return client_keep_alive;
  }

  // The upstream failed after the response began: no retry is possible. An
  // SSE client gets an error event in its dialect and a properly ended body,
  // never a clean end that looks like a complete answer.
  ctx.upstream_failed_midstream = true;
  s.w.metrics().downstream_rq_stream_failed.add();
  if (failure == beast::error::timeout) s.w.metrics().upstream_rq_timeout.add();
  auto reason = describe_upstream_error(failure, r.settings, false);
  ctx.error = reason.message;
  spdlog::warn("request {}: upstream {} failed mid-stream: {}", ctx.request_id, r.settings.name, failure.message());
  s.upstream->stream.close();
  if (!ctx.streamed || !chunked) co_return false;  // a cut connection is the only honest signal left

  // Whole events only reached the client, unless one huge event was being
  // passed through: then close it first.
  std::string tail = aligner.forwarded() > sse.boundary() ? "\n\n" : "";
  tail += stream::make_error_event(ctx.dialect, "upstream_error",
                                   failure == beast::error::timeout ? "upstream_timeout" : "upstream_disconnected",
                                   reason.message);
  if (!co_await write_last_chunks(s, tail, limits.client_write_timeout)) co_return false;
  co_return client_keep_alive;
}

// The outcome of one attempt that did not reach the relay.
struct attempt_failure {
  unsigned status;
  std::string code;
  std::string message;
};

net::awaitable<void> run_exchange(exchange_state& s, client_request& request, exchange_plan& plan,
                                  bool& keep_client) {
  auto& ctx = s.ctx;
  const bool client_keep_alive = keep_client;
  std::optional<attempt_failure> last_failure;

  for (std::size_t attempt = 0; attempt < plan.upstreams.size(); ++attempt) {
    const bool last = attempt + 1 == plan.upstreams.size();
    const auto& settings = *plan.upstreams[attempt];
    if (attempt > 0) {
      // Fall back only while nothing has reached the client; jittered backoff.
      auto pause = routing::backoff_for(static_cast<int>(attempt), plan.retry_backoff, s.w.rng());
      if (pause.count() > 0) {
        net::steady_timer timer(s.client.get_executor(), pause);
        co_await timer.async_wait(use_tuple);
      }
      if (ctx.client_gone) co_return;
      s.w.metrics().upstream_rq_fallback.add();
      spdlog::info("request {}: falling back to upstream {} ({})", ctx.request_id, settings.name,
                   last_failure ? last_failure->message : "");
    }
    ctx.attempts = static_cast<unsigned>(attempt + 1);
    ctx.upstream = settings.name;
    auto& active = s.w.active_streams(settings.name);
    if (settings.max_concurrent_streams && active >= settings.max_concurrent_streams) {
      last_failure = attempt_failure{503, "upstream_overloaded",
                                     "upstream '" + settings.name + "' is at its concurrent stream limit"};
      continue;
    }

    auto& pool = s.w.pool_for(settings);
    const auto deadline = ctx.request_read + settings.timeouts.total;
    std::string up_head;
    std::vector<net::const_buffer> up_pieces;  // made when first needed: a forwarded body needs none

    // The connection the body went on while it arrived (attempt 0 only):
    // only the body's last byte is left to send on it. Let go unused (this
    // attempt skipped), it closes before that byte.
    auto forwarded = attempt == 0 ? std::exchange(plan.first_connection, std::nullopt) : std::nullopt;
    // (No edit reaches the body's last byte: they end at or before its closing brace.)
    const auto body = body_text(request);
    const auto last_byte = body.empty() ? net::const_buffer() : net::const_buffer(&body.back(), 1);

    // A pooled connection may have been closed by the upstream while idle; a
    // failure on it before any response byte is retried once on a new one.
    for (int stale_retry = 0;; ++stale_retry) {
      upstream::acquire_result acquired;
      const bool early = stale_retry == 0 && forwarded;
      // (No ternary between two awaitables: GCC 12 destroys the wrong temporary.)
      if (early) acquired = std::move(*forwarded);
      else if (stale_retry == 0) acquired = co_await pool.acquire();
      else acquired = co_await pool.connect_new();
      if (ctx.client_gone) co_return;
      if (!acquired.conn) {
        s.w.metrics().upstream_cx_connect_fail.add();
        note_upstream_failure(s, settings, *plan.config);
        bool timeout = acquired.failure == upstream::connect_failure::timeout;
        spdlog::warn("request {}: {}", ctx.request_id, acquired.message);
        last_failure = attempt_failure{timeout ? 504u : 502u, timeout ? "upstream_timeout" : "upstream_unavailable",
                                       acquired.message};
        break;
      }
      s.upstream = std::move(acquired.conn);
      if (!early) ctx.upstream_connected = clock::now();  // (forwarded: when the body began to go)
      ctx.forwarded_early = early;
      if (s.upstream->reused) s.w.metrics().upstream_cx_reused.add();

      auto& up_stream = s.upstream->stream;
      up_stream.expires_after(until(deadline, settings.timeouts.first_byte));
      // Head and body in one scatter write; or the last byte of a body forwarded early.
      if (!early && up_pieces.empty())
        up_pieces = upstream_request(request, pool, settings, ctx, plan.edits[attempt], up_head);
      std::span<const net::const_buffer> to_send = up_pieces;
      if (early) to_send = std::span<const net::const_buffer>(&last_byte, 1);
      auto [wec, wn] = co_await write_all(up_stream, to_send);
      ctx.request_sent = clock::now();
      upstream::response_head head;
      beast::flat_buffer up_buffer;
      error_code ec = wec;
      if (!ec) {
        ++active;
        up_stream.nothing_to_read_yet();  // (the answer cannot be there yet)
        constexpr std::size_t head_limit = 64 * 1024;
        ec = co_await read_response_head(up_stream, up_buffer, head, head_limit);
        --active;
      }
      if (ctx.client_gone) co_return;  // the watcher already closed the upstream
      if (ec) {
        bool stale = s.upstream->reused && stale_retry == 0 && ec != beast::error::timeout;
        s.upstream->stream.close();
        s.upstream.reset();
        if (stale) continue;
        if (ec == beast::error::timeout) s.w.metrics().upstream_rq_timeout.add();
        note_upstream_failure(s, settings, *plan.config);
        auto failure = describe_upstream_error(ec, settings, true);
        spdlog::warn("request {}: {}", ctx.request_id, failure.message);
        last_failure = attempt_failure{failure.status, failure.code, failure.message};
        break;
      }

      unsigned status = head.status;
      if (status >= 500) note_upstream_failure(s, settings, *plan.config);
      else s.w.health().record_success(settings.name);
      if ((status >= 500 || status == 429) && !last) {
        // Nothing was sent to the client yet: this answer can be replaced.
        last_failure = attempt_failure{status, "upstream_status", "upstream '" + settings.name + "' answered " +
                                                                      std::to_string(status)};
        s.upstream->stream.close();
        s.upstream.reset();
        break;
      }
      // Nothing is sent upstream again: the request's head goes back now
      // rather than at the end of the stream.
      std::string().swap(up_head);
      std::vector<net::const_buffer>().swap(up_pieces);
      ++active;
      relay_context r{s, pool, settings, plan, deadline, client_keep_alive, request.head.version};
      keep_client = co_await relay_response(r, head, up_buffer);
      --active;
      co_return;
    }
  }

  s.finished = true;
  auto failure = last_failure.value_or(attempt_failure{502, "upstream_unavailable", "no upstream to try"});
  ctx.error = failure.message;
  co_await send_json_error(s.client, failure.status, failure.message, "upstream_error", failure.code,
                           client_keep_alive, ctx);
}

}  // namespace

net::awaitable<bool> proxy_exchange(any_stream& client, client_watcher& watcher, client_request& request,
                                    worker& w, exchange_plan& plan, request_context& ctx) {
  exchange_state s(client, ctx, w);
  bool keep_client = request.head.keep_alive();
  // The watcher's read runs without a deadline; writes get their own.
  client.expires_never();
  // The watcher runs beside the exchange rather than through an awaitable
  // operator: a parallel group connects a cancellation slot to every
  // operation inside it, and installing and clearing those cost about 3 %
  // of the relay's CPU (perf, 9,000 slow streams). Nothing here needs that
  // cancellation.
  watcher.watch(s);
  std::exception_ptr failed;
  try {
    co_await run_exchange(s, request, plan, keep_client);
  } catch (...) {
    failed = std::current_exception();
  }
  s.finished = true;
  if (s.upstream) s.upstream->stream.close();  // not returned to the pool: not reusable
  // A read of the watcher's still pending goes on as the session's wait for
  // the next request; it no longer reports to `s`.
  watcher.unwatch();
  if (failed) std::rethrow_exception(failed);
  if (ctx.client_gone) {
    w.metrics().downstream_rq_client_cancelled.add();
    if (ctx.error.empty()) ctx.error = "client disconnected";
    co_return false;
  }
  co_return keep_client;
}

namespace {

net::awaitable<void> send_body(any_stream& client, http::status status, std::string body, bool keep_alive,
                               request_context& ctx) {
  http::response<http::empty_body> res{status, 11};
  res.set(http::field::content_type, "application/json");
  res.set("x-request-id", ctx.request_id);
  res.content_length(body.size());
  res.keep_alive(keep_alive);
  ctx.status = res.result_int();
  const auto head = head_bytes(res.base());
  // An answer to HEAD is its head alone, with the length a GET's body
  // would have (RFC 9110 §9.3.2): a body there would be read as the start
  // of the connection's next answer.
  const bool head_alone = ctx.method == "HEAD";
  const std::array<net::const_buffer, 2> pieces{net::const_buffer(head.data(), head.size()),
                                                net::const_buffer(body.data(), head_alone ? 0 : body.size())};
  client.expires_after(std::chrono::seconds(10));
  auto [ec, n] = co_await write_all(client, pieces);
  if (ec) ctx.client_gone = true;
  ctx.bytes_to_client += n;
}

}  // namespace

net::awaitable<void> send_json_error(any_stream& client, unsigned status, std::string_view message,
                                     std::string_view type, std::string_view code, bool keep_alive,
                                     request_context& ctx) {
  co_await send_body(client, static_cast<http::status>(status), json_error_body(message, type, code), keep_alive, ctx);
}

net::awaitable<void> send_json(any_stream& client, std::string body, bool keep_alive, request_context& ctx) {
  co_await send_body(client, http::status::ok, std::move(body), keep_alive, ctx);
}

}  // namespace tokengate
