#include "stream/relay.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/deferred.hpp>
#include <boost/asio/write.hpp>
#include <memory>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "http/body_decoder.hpp"
#include "io/drained_read.hpp"
#include "io/write_all.hpp"
#include "stream/accounting.hpp"
#include "stream/client_framing.hpp"
#include "stream/error_event.hpp"
#include "stream/event_aligner.hpp"
#include "stream/final_event.hpp"
#include "stream/sse_parser.hpp"
#include "stream/whole_translation.hpp"
#include "stream/whole_usage.hpp"

// GCC 12 takes Asio's coroutine frames, allocated by awaitable_frame_base's
// operator new (through the thread's recycling cache) and freed by its sized
// operator delete, for a mismatched pair once both are inlined into the
// relay's coroutine: a false positive of GCC's with class-specific
// allocation of coroutine frames (GCC bug 109224 is the same pattern). It
// was the build's one warning.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace tokengate::stream {
namespace {

using clock = std::chrono::steady_clock;
using buffers = std::span<const net::const_buffer>;

// For the relay's upstream reads, one per event: awaited as a deferred
// operation, a read resumes this coroutine from its completion handler,
// where use_awaitable wraps it in a coroutine frame of its own (allocated,
// entered, left and freed per read).
constexpr auto deferred_tuple = net::as_tuple(net::deferred);

// Each upstream event of a translated answer: observed by the accounting
// first, then translated, unless it is the one the limit cut off.
class translating_sink final : public sse_sink {
 public:
  translating_sink(stream_accounting& accounting, answer_translator& translator, std::string& out)
      : accounting_(accounting), translator_(translator), out_(out) {}
  void on_event(const sse_event& event) override {
    accounting_.on_event(event);
    if (accounting_.held_back())
      translator_.on_held_back(event);
    else if (!accounting_.cut())
      translator_.on_event(event, out_);
  }

 private:
  stream_accounting& accounting_;
  answer_translator& translator_;
  std::string& out_;
};

// How the client's answer is framed, decided once from the upstream's head.
struct framing {
  // A 204 or 304 answer ends with its head, and so does the client's (1xx
  // ones were passed over, read_response_head): no framing field (RFC 9110
  // §8.6 forbids a length on a 204, and chunked framing there would make
  // our last chunk the start of the client's next answer).
  bool head_only;
  std::optional<std::uint64_t> content_length;
  // Without a length the client gets chunked framing; HTTP/1.0 clients get
  // a close-delimited body instead.
  bool chunked;
  bool client_keep_alive;
};

// (`rewritten`: a translated body, whose length is not the upstream's.)
framing framing_for(const response_head& head, bool client_keep_alive, unsigned client_http_version,
                    bool rewritten) {
  framing f;
  f.head_only = head.ends_with_head();
  f.content_length = f.head_only || rewritten ? std::nullopt : head.content_length;
  f.chunked = !f.head_only && !f.content_length && client_http_version >= 11;
  f.client_keep_alive = client_keep_alive && (f.head_only || f.content_length || f.chunked);
  return f;
}

// (Each ending's result is awaited into a variable and then returned: GCC
// 12 miscompiles `if (...) co_return co_await f();` in a member coroutine,
// resuming its frame at a state it does not have.)
//
// One answer's relay. The loop that drives it (relay_response, below)
// reads, forwards and writes through these steps; each ends in one of the
// four endings: finish_cut (the output limit), finish_clean,
// finish_not_sse (a stream that held no event), finish_failed (the
// upstream failed mid-answer). What every event's turn reads lives in this
// object, in the loop's coroutine frame: with thousands of streams open
// the caller's frame is out of the cache by the next event.
class response_relay {
 public:
  response_relay(upstream::exchange_state& s, upstream::answer& a,
                 const upstream::exchange_plan& plan, const relay_env& env, bool client_keep_alive,
                 unsigned client_http_version, answer_translator* translator,
                 const upstream::suspended_stream* resumed);
  response_relay(const response_relay&) = delete;
  response_relay& operator=(const response_relay&) = delete;

  bool body_done() const { return body_.done(); }
  bool client_gone() const { return ctx_.client_gone; }
  bool head_pending() const { return head_pending_; }

  // A turn begins with the part of the body already in hand; false when
  // there is none and a read must bring more.
  bool take_part();
  // The read: its buffer, an attempt without waiting, the wait's deadline,
  // and what it brought.
  net::mutable_buffer prepare_read();
  bool read_now(net::mutable_buffer into, error_code& ec, std::size_t& n);
  drained_reader* plain_upstream() { return plain_upstream_ ? &*plain_upstream_ : nullptr; }
  any_stream& upstream() { return s_.upstream->stream; }
  void arm_idle_deadline() {
    auto until = std::min(a_.deadline, now_ + idle_timeout_);
    if (holding_) [[unlikely]]
      until = std::min(until, first_token_deadline_);
    upstream().expires_at(until);
  }
  void read_done(error_code ec, std::size_t n);

  // The part's bytes, observed and framed for the client (frame).
  bool has_bytes() const { return part_.size > 0; }
  buffers forward();
  // After the part's write: true when one huge event is being held and
  // must go as it is (forward_held, then held_forwarded).
  bool after_forward();
  buffers forward_held();
  void held_forwarded();
  // Whether the turn ends the loop: the client gone, the limit cut, a failure.
  bool turn_ends();

  // The head on its own, before anything else is written or awaited
  // (nothing while the opening is held).
  buffers head_alone();

  // timeouts.first_token: until an event stream's first content event
  // nothing reaches the client, head included (the opening events wait in
  // held_), so that an upstream that fails or stays silent before it can
  // still be left for the next target with the client none the wiser.
  bool holding() const { return holding_; }
  // Whether the attempt is given up before its first token (the first
  // token's deadline passed; or the upstream failed, or sent an error
  // event, and another target is left): the upstream closed, the reason
  // left in the exchange's state for the next attempt.
  bool abandons();
  bool abandons_whole();
  // What was held, with the head, for a stream that ended (or failed on
  // the last target) before any content.
  buffers release_held();
  // A write handed to the kernel at once when the client's socket takes it
  // all, the usual case (no asynchronous operation, no suspension, no
  // frame). True when nothing is left to send, or when the client is gone;
  // false leaves the unsent part for send_rest.
  bool write_now(buffers out);
  net::awaitable<bool> send_rest();

  // The loop is over: the stream's counts recorded; then which ending it
  // takes, once the head (if nothing else went) is written.
  void settle();
  enum class ending { cut, clean, failed };
  ending how_it_ends() const;
  // A failed stream the plan may resume: left open, its text kept in the
  // exchange's state (s.suspended), the upstream closed.
  bool suspends();
  // What was held, or the head alone, goes first; then the ending.
  net::awaitable<bool> finish();
  net::awaitable<bool> finish_cut();
  net::awaitable<bool> finish_clean();
  net::awaitable<bool> finish_failed();
  net::awaitable<bool> finish_diverged();

 private:
  buffers frame(const std::vector<net::const_buffer>& what, bool ends_body = false);
  buffers frame_holding(const std::vector<net::const_buffer>& what, bool ends_body);
  buffers forward_translated();
  void copy_for_cache(std::string_view bytes);
  std::span<char> in_hand();
  void note_relay_delay();
  void note_resumed();
  net::awaitable<bool> write_client(buffers out);
  net::awaitable<bool> write_last_chunks(std::string_view tail);

  net::awaitable<bool> finish_not_sse();

  upstream::exchange_state& s_;
  request_context& ctx_;
  upstream::answer& a_;
  const upstream::exchange_plan& plan_;
  const relay_env& env_;
  answer_translator* translator_;              // null: the answer is in the client's dialect
  const upstream::suspended_stream* resumed_;  // until its first new content is written
  std::string translated_;                     // the client's events for the turn's upstream events
  const framing framing_;
  const config::duration idle_timeout_;
  beast::flat_buffer up_buffer_;
  std::string head_text_;
  bool head_pending_ = true;
  bool holding_ = false;
  clock::time_point first_token_deadline_;
  // (Made only for a stream that holds its opening: every stream's relay
  // lives as long as the stream, and most hold nothing.)
  struct held_opening {
    std::string bytes;
    std::vector<net::const_buffer> released;
  };
  std::unique_ptr<held_opening> held_;
  bool last_chunk_sent_ = false;
  std::vector<net::const_buffer> pieces_, framed_, rest_;
  chunk_line chunk_header_;
  sse_parser sse_;
  metrics::series& series_;
  metrics::route_windows& windows_;
  stream_accounting accounting_;
  // An answer that is not an event stream: its usage (made for such an answer only).
  std::unique_ptr<whole_usage> whole_usage_;
  event_aligner aligner_;
  body_decoder body_;
  std::optional<drained_reader> plain_upstream_;  // (TLS reads go through the TLS engine)
  // The time of the last read's return, taken once per read for the
  // chunk's time in the accounting, the relay delay's window and the next
  // read's idle deadline. The clock is read again for the deadline only
  // after a wait for the client (a slow client's write may have taken
  // seconds): reading it costs about 3 % of the relay's user time per
  // read on a virtual machine's clock (perf), nginx reads it once per
  // turn of its event loop.
  clock::time_point now_;
  bool waited_for_client_ = false;  // since the last read: its time stamp may be long past
  bool upstream_ended_ =
      false;  // EOF seen: the decoder hears of it once the bytes in hand are decoded
  bool grow_before_next_read_ = false;
  std::size_t room_ = 0;  // the last read's room
  // The read buffer's bytes decoded by the last turn: their write is done
  // by the next turn, which lets them go.
  std::size_t decoded_ = 0;
  // The turn's part of the body, its bytes, where they start in the
  // stream, and its error.
  body_decoder::result part_;
  std::string_view bytes_;
  std::uint64_t chunk_at_ = 0;
  bool had_token_ = false;
  error_code ec_;
  bool cut_mid_event_ = false;
  error_code failure_;
};

// A whole JSON answer (2xx, not translated: a translated one is read
// whole already) is held until its body's end, so that one cut mid-body
// reaches the client as nothing at all and is tried again. Engines send a
// whole answer at once; one longer than this goes on as it comes. Other
// bodies are not held: Ollama's NDJSON, say, is a stream.
constexpr std::size_t max_whole_held = 256 * 1024;
bool holds_whole(const request_context& ctx, const response_head& head,
                 const answer_translator* translator) {
  return !ctx.streamed && !translator && head.has_body() && head.status >= 200 &&
         head.status < 300 &&
         head.value_of(known_field::content_type).starts_with("application/json");
}

// (A resumed stream's framing is the client's stream's: chunked, its head sent.)
framing framing_resumed(bool client_keep_alive) {
  return framing{false, std::nullopt, true, client_keep_alive};
}

// Whether a stream may be resumed should its upstream fail: the plan asks
// for it, resumes are left, and the client streams chat completions,
// Anthropic messages or Responses (translated or not).
bool may_resume(const upstream::exchange_state& s, const upstream::exchange_plan& plan,
                const response_head& head) {
  const auto d = s.ctx.dialect;
  return plan.resume.mode != config::resume_mode::off && s.resumes_left > 0 &&
         plan.resume.buffer_bytes > 0 &&
         (d == dialect::openai_chat || d == dialect::anthropic_messages ||
          d == dialect::openai_responses) &&
         head.value_of(known_field::content_type).starts_with("text/event-stream");
}

// The text a stream may keep for a resume (0: none). A resumed stream
// keeps its text whatever is left of its resumes: catching up reads it.
std::size_t resume_buffer(const upstream::exchange_state& s, const upstream::exchange_plan& plan,
                          const response_head& head, const upstream::suspended_stream* resumed) {
  if (resumed) return std::max<std::size_t>(plan.resume.buffer_bytes, resumed->delivered.size());
  return may_resume(s, plan, head) ? plan.resume.buffer_bytes : 0;
}

response_relay::response_relay(upstream::exchange_state& s, upstream::answer& a,
                               const upstream::exchange_plan& plan, const relay_env& env,
                               bool client_keep_alive, unsigned client_http_version,
                               answer_translator* translator,
                               const upstream::suspended_stream* resumed)
    : s_(s),
      ctx_(s.ctx),
      a_(a),
      plan_(plan),
      env_(env),
      translator_(translator),
      resumed_(resumed),
      framing_(resumed ? framing_resumed(resumed->client_keep_alive)
                       : framing_for(a.head, client_keep_alive, client_http_version, translator)),
      idle_timeout_(a.settings->timeouts.idle),
      up_buffer_(std::move(a.buffer)),
      series_(env.latency.series_for(ctx_.route, ctx_.model_label, a.settings->name)),
      windows_(env.latency.windows_for(ctx_.route)),
      // The limit is only enforced where cutting leaves a well-formed stream.
      accounting_(ctx_, sse_,
                  a.head.value_of(known_field::content_type).starts_with("text/event-stream") &&
                          framing_.chunked
                      ? plan.output_limit
                      : std::nullopt,
                  series_, windows_, translator ? translator->upstream_dialect() : ctx_.dialect,
                  resume_buffer(s, plan, a.head, resumed)),
      // The body's framing (chunks, a length, or up to the close) is undone
      // in the read buffer itself: no second buffer, no copy. Read and
      // decoded here rather than through http::async_read_some: Beast's
      // composed read costs more than the read itself, and it stops after
      // one HTTP chunk where we want every chunk already received, so that
      // events the upstream sent in separate chunks leave in one write (one
      // syscall per batch, as nginx does).
      body_(!a.head.has_body()      ? body_decoder::none()
            : a.head.chunked        ? body_decoder::chunked()
            : a.head.content_length ? body_decoder::with_length(*a.head.content_length)
                                    : body_decoder::until_close()) {
  keep_small(up_buffer_);
  ctx_.upstream_headers = clock::now();
  ctx_.streamed = a.head.value_of(known_field::content_type).starts_with("text/event-stream");
  const bool hold_whole = holds_whole(ctx_, a.head, translator);  // (before its fields go)
  ctx_.status = a.head.status;
  // The client's head leaves with the first events when the read that
  // brought the upstream's head brought them too (the usual case: one
  // write, as nginx does, where there were two), else on its own before
  // the relay waits for the body.
  if (resumed) {  // (the client has its head: the stream goes on where it stopped)
    head_pending_ = false;
    if (s.prefills(a.attempt))
      accounting_.continue_after(resumed->delivered, resumed->delivered_tokens);
    else
      accounting_.catch_up(resumed->delivered);
  } else {
    head_text_ = client_head(a.head, plan.response_headers, ctx_, framing_.content_length,
                             framing_.chunked, framing_.client_keep_alive);
  }
  // The upstream's head is read no more: its fields go back now rather than
  // at the end of the stream (what is kept of it, its framing and
  // keep-alive, is apart from them).
  a.head.release_fields();
  // From here each side's deadline is set around each wait on it: the
  // upstream's read must bring a byte within the idle timeout, a client's
  // write that the kernel did not take at once must end within the write
  // timeout. Setting one stores a time point; the connection's one timer
  // (io/stream_deadline.hpp) is armed again only when it is due later than
  // the new deadline: on the client's side not (it was armed for the
  // request's head, sooner), on the upstream's only where nothing sooner
  // was pending (a new connection: armed for its first byte, 120 s by
  // default, later than the idle gap). A timer of the relay's own cost an
  // allocation, a timer-heap insertion and, at the stream's end, a
  // cancelled wait that Asio queued as a handler, and so a zero-timeout
  // epoll_wait, per stream.
  s.client.expires_never();
  upstream().expires_never();
  if (ctx_.streamed) env.metrics.stream_active.add();
  if (ctx_.streamed && !resumed && a.settings->timeouts.first_token.count() > 0) {
    holding_ = true;  // (measured as TTFT is: from the request's sending)
    first_token_deadline_ = ctx_.request_sent + a.settings->timeouts.first_token;
    held_ = std::make_unique<held_opening>();
  } else if (hold_whole) {
    holding_ = true;  // (until the body's end: no first token to wait for)
    first_token_deadline_ = clock::time_point::max();
    held_ = std::make_unique<held_opening>();
  }
  pieces_.reserve(4);
  framed_.reserve(8);
  if (!upstream().is_tls()) plain_upstream_.emplace(upstream().socket(), upstream().reactor());
  now_ = clock::now();
}

// The pieces of one write, framed as one HTTP chunk when the client gets
// chunked encoding. The chunk header is written here and the sequence is
// passed as a span: Asio and Beast copy a buffer sequence several times per
// write, and Beast's make_chunk(vector) cost seven mallocs per event
// (heaptrack: 11.5 allocations per event before, 4.6 after the span).
// The client's head goes in front of the first write, and the last chunk
// after the write that ends the body when it is known to (`ends_body`).
[[gnu::always_inline]] inline buffers response_relay::frame(
    const std::vector<net::const_buffer>& what, bool ends_body) {
  if (holding_) [[unlikely]]
    return frame_holding(what, ends_body);
  auto size = net::buffer_size(what);
  framed_.clear();
  if (head_pending_) {
    framed_.emplace_back(head_text_.data(), head_text_.size());
    head_pending_ = false;
  }
  if (framing_.chunked && size > 0) framed_.push_back(chunk_size_line(size, chunk_header_));
  framed_.insert(framed_.end(), what.begin(), what.end());
  if (framing_.chunked && size > 0) framed_.emplace_back("\r\n", 2);
  if (framing_.chunked && ends_body) {
    framed_.push_back(last_chunk);
    last_chunk_sent_ = true;
  }
  return framed_;
}

buffers response_relay::head_alone() {
  if (!head_pending_ || holding_) return {};
  pieces_.clear();
  return frame(pieces_);
}

// Before the first content event: the opening events are kept (copied:
// the read buffer's bytes are gone by the next turn); with the first
// content, or the body's end, they go in front of it, head first.
buffers response_relay::frame_holding(const std::vector<net::const_buffer>& what, bool ends_body) {
  const bool too_long = !ctx_.streamed && held_->bytes.size() > max_whole_held;
  if (ctx_.content_events == 0 && !ends_body && !too_long) {
    for (const auto& b : what) held_->bytes.append(static_cast<const char*>(b.data()), b.size());
    return {};
  }
  holding_ = false;
  auto& released = held_->released;
  if (!held_->bytes.empty()) released.emplace_back(held_->bytes.data(), held_->bytes.size());
  released.insert(released.end(), what.begin(), what.end());
  return frame(released, ends_body);
}

buffers response_relay::release_held() {
  holding_ = false;
  auto& released = held_->released;
  if (!held_->bytes.empty()) released.emplace_back(held_->bytes.data(), held_->bytes.size());
  return frame(released);
}

bool response_relay::abandons() {
  if (!holding_ || ctx_.client_gone) return false;
  if (!ctx_.streamed) return abandons_whole();
  const bool silent = failure_ == beast::error::timeout;
  const bool another_target = a_.attempt + 1 < plan_.upstreams.size();
  const bool failed = failure_ || accounting_.facts().error;
  if (!silent && !(failed && another_target)) return false;
  auto why = silent
                 ? request_error::upstream(
                       504, "upstream_timeout",
                       "upstream '" + a_.settings->name + "' sent no token within " +
                           std::to_string(a_.settings->timeouts.first_token.count()) + " ms")
                 : request_error::upstream(
                       502, "upstream_error",
                       "upstream '" + a_.settings->name + "' failed before its first token", true);
  s_.abandoned = std::make_unique<request_error>(std::move(why));
  spdlog::info("request {}: {}; the next target's turn", ctx_.request_id, s_.abandoned->message);
  upstream().close();
  s_.upstream.reset();
  return true;
}

// A whole answer cut mid-body, nothing of it sent: the same target once
// more (a truncated answer is a transient fault), else the next target;
// with none left, a 502 rather than half a body. A timeout moves on at once.
bool response_relay::abandons_whole() {
  if (!failure_) return false;
  const bool silent = failure_ == beast::error::timeout;
  s_.retry_same_target = !silent && !s_.whole_retried;
  s_.whole_retried = s_.whole_retried || s_.retry_same_target;
  s_.abandoned = std::make_unique<request_error>(request_error::upstream(
      silent ? 504 : 502, silent ? "upstream_timeout" : "upstream_disconnected",
      "upstream '" + a_.settings->name + "' cut its answer short", true));
  spdlog::info("request {}: {}; tried again", ctx_.request_id, s_.abandoned->message);
  upstream().close();
  s_.upstream.reset();
  return true;
}

[[gnu::always_inline]] inline bool response_relay::write_now(buffers out) {
  auto total = net::buffer_size(out);
  if (total == 0) return true;
  error_code ec;
  auto n = s_.client.send_now(out, ec);
  if (ec) {
    s_.client_write_failed();
    return true;
  }
  ctx_.bytes_to_client += n;
  env_.metrics.downstream_bytes_sent.add(n);
  if (n == total) return true;
  unsent_part(out, n, rest_);
  return false;
}

net::awaitable<bool> response_relay::send_rest() {
  waited_for_client_ = true;
  return write_client(rest_);
}

// A client write; on failure the client is treated as gone. Its deadline
// is the write timeout from now. (The pieces must outlive the write: the
// caller awaits it.)
net::awaitable<bool> response_relay::write_client(buffers out) {
  if (net::buffer_size(out) == 0) co_return true;  // (an empty HTTP chunk would end the body)
  // The deadline covers the watcher's pending read too, which is as it
  // should be (a client that takes no write in time is gone), but only for
  // as long as the write lasts.
  s_.client.expires_after(env_.limits.client_write_timeout);
  auto [ec, n] = co_await net::async_write(s_.client, out, use_tuple);
  s_.client.expires_never();
  if (ec) {
    s_.client_write_failed();
    co_return false;
  }
  ctx_.bytes_to_client += n;
  env_.metrics.downstream_bytes_sent.add(n);
  co_return true;
}

// The end of a chunked body after the events: `tail` as one chunk, then
// the last chunk. (An empty chunk would be the last chunk itself.)
net::awaitable<bool> response_relay::write_last_chunks(std::string_view tail) {
  chunk_line line;
  auto chunk = as_chunk(tail, line);
  if (!tail.empty()) {
    if (!co_await write_client(chunk)) co_return false;
  }
  bool written = co_await write_client(buffers(&last_chunk, 1));
  co_return written;
}

std::span<char> response_relay::in_hand() {
  auto bytes = up_buffer_.data();
  return std::span<char>(static_cast<char*>(bytes.data()), bytes.size());
}

bool response_relay::take_part() {
  up_buffer_.consume(decoded_);
  decoded_ = 0;
  if (!head_pending_ && head_text_.capacity() > 0)
    std::string().swap(head_text_);  // written: its bytes go back
  ec_ = {};
  part_ = body_.decode(in_hand(), ec_);
  if (ec_ || part_.size > 0 || body_.done()) {
    decoded_ = part_.used;
    return true;
  }
  up_buffer_.consume(part_.used);  // framing only
  part_ = body_decoder::result();
  if (!upstream_ended_) return false;
  body_.end_of_input(ec_);  // the end of a body that runs to the close; an error anywhere else
  return true;
}

net::mutable_buffer response_relay::prepare_read() {
  if (grow_before_next_read_) {
    // The last read left bytes waiting in the kernel (TCP_INQ; through
    // TLS: it filled all the room it had): the upstream is ahead of us, so
    // grow the buffer and catch up in few reads (with 515-byte reads a
    // loaded proxy made 1.6x nginx's syscalls per event; nginx reads 4
    // KiB). 16x at once, 512 B -> 8 KiB: a 20-token answer takes 1.7
    // syscalls fewer than growing 4x at a time. A slow stream's reads leave
    // nothing behind, so its buffer stays small whatever the size of its
    // events. Grown here, when another read follows, not on the read that
    // brought the stream's last events: every stream of a burst grew it as
    // it ended, an allocation in the burst's busiest second.
    up_buffer_.reserve(std::min(16 * up_buffer_.capacity(), env_.limits.stream_buffer_bytes));
    grow_before_next_read_ = false;
  }
  // Beast's sizing: the buffer's free room, at least 512 bytes.
  room_ = std::max<std::size_t>(512, up_buffer_.capacity() - up_buffer_.size());
  if (std::exchange(waited_for_client_, false)) now_ = clock::now();
  return up_buffer_.prepare(room_);
}

bool response_relay::read_now(net::mutable_buffer into, error_code& ec, std::size_t& n) {
  return plain_upstream_ ? plain_upstream_->read_now(into, ec, n)
                         : upstream().read_now(into, ec, n);
}

void response_relay::read_done(error_code ec, std::size_t n) {
  now_ = clock::now();
  up_buffer_.commit(n);
  bool upstream_ahead = plain_upstream_ ? plain_upstream_->last_queued() > 0 : n == room_;
  grow_before_next_read_ =
      upstream_ahead && up_buffer_.capacity() < env_.limits.stream_buffer_bytes;
  if (ec == net::error::eof)
    upstream_ended_ = true;
  else if (ec && upstream().timed_out())
    ec_ = beast::error::timeout;  // (plain reads are not wrapped)
  else
    ec_ = ec;
  if (!ec_) part_ = body_.decode(in_hand(), ec_);
  decoded_ = part_.used;
}

// How long the bytes about to be written have waited in the proxy: from
// the kernel's arrival stamp of the last read's newest bytes to that read's
// return (`now_`; the work between it and the write, under a microsecond
// per event, is left out rather than paid for with another clock read per
// event). What the client's socket takes then is its own pace.
void response_relay::note_relay_delay() {
  auto arrival_ns = plain_upstream_ ? plain_upstream_->last_arrival_ns() : 0;
  if (arrival_ns == 0) return;
  auto real_now_ns = env_.realtime.real_ns_at(now_);
  if (real_now_ns < arrival_ns) return;  // the clock stepped back
  auto micros = static_cast<std::uint64_t>((real_now_ns - arrival_ns) / 1000);
  series_.relay_delay.record_micros(micros);
  windows_.relay_delay.record(micros, now_);
}

// The body as the client gets it, for the response cache: the upstream's
// bytes, or a translated stream's events in the client's dialect; only
// while within its bound (past it the copy is let go, and so is the entry).
void response_relay::copy_for_cache(std::string_view bytes) {
  auto& copy = *plan_.copy;
  if (!copy.usable) return;
  if (copy.bytes.size() + bytes.size() > copy.limit) {
    copy = {{}, copy.limit, false};
    return;
  }
  copy.bytes.append(bytes);
  if (!ctx_.streamed || bytes.empty()) return;
  if (copy.marks.empty()) copy.first = now_;
  auto at = std::chrono::duration_cast<std::chrono::milliseconds>(now_ - copy.first);
  if (!copy.marks.empty() && copy.marks.back().at == at)
    copy.marks.back().end = copy.bytes.size();  // (a mark a millisecond at most)
  else
    copy.marks.push_back({copy.bytes.size(), at});
}

buffers response_relay::forward() {
  bytes_ = std::string_view(static_cast<const char*>(up_buffer_.data().data()) + part_.begin,
                            part_.size);
  if (plan_.copy && !translator_) [[unlikely]]
    copy_for_cache(bytes_);
  if (!ctx_.streamed) {
    if (!whole_usage_) whole_usage_ = std::make_unique<whole_usage>();
    whole_usage_->feed(bytes_);
    pieces_.assign(1, net::const_buffer(bytes_.data(), bytes_.size()));
    return frame(pieces_, body_.done());
  }
  if (translator_) return forward_translated();
  chunk_at_ = sse_.fed();
  accounting_.begin_chunk(now_);
  had_token_ = ctx_.content_events > 0;
  sse_.feed(bytes_, accounting_);
  auto upto = accounting_.cut() ? accounting_.cut_at() : sse_.boundary();
  cut_mid_event_ = accounting_.cut() && upto < aligner_.forwarded();
  aligner_.plan(bytes_, chunk_at_, std::max(upto, aligner_.forwarded()), accounting_.drops(),
                pieces_);
  note_relay_delay();
  // The body ended in this read on an event's end, after events: the last
  // chunk goes with them (one write fewer per stream); the endings would
  // find nothing more to send.
  // (Not a stream that may yet be resumed: one that did not end properly.)
  bool ends_body = body_.done() && !accounting_.cut() && sse_.boundary() == sse_.fed() &&
                   sse_.events_dispatched() > 0 &&
                   !(accounting_.resumable() && !accounting_.facts().ended_properly());
  return frame(pieces_, ends_body);
}

// A translated turn: the client's events for the upstream's whole events
// (an unfinished one waits in the parser), in place of its bytes.
buffers response_relay::forward_translated() {
  accounting_.begin_chunk(now_);
  had_token_ = ctx_.content_events > 0;
  translated_.clear();
  translating_sink sink(accounting_, *translator_, translated_);
  sse_.feed(bytes_, sink);
  accounting_.drops().clear();  // (the translation says usage only where the client asked)
  note_relay_delay();
  bool ends_body = body_.done() && !accounting_.cut() && sse_.boundary() == sse_.fed() &&
                   sse_.events_dispatched() > 0 &&
                   !(accounting_.resumable() && !accounting_.facts().ended_properly());
  if (ends_body) translator_->on_end(translated_);
  if (plan_.copy) [[unlikely]]
    copy_for_cache(translated_);
  pieces_.clear();
  if (!translated_.empty()) pieces_.emplace_back(translated_.data(), translated_.size());
  return frame(pieces_, ends_body);
}

bool response_relay::after_forward() {
  if (!ctx_.streamed || ctx_.client_gone) return false;
  if (!had_token_ && ctx_.content_events > 0) ctx_.first_token_written = clock::now();
  if (resumed_ && ctx_.content_events > resumed_->delivered_tokens) [[unlikely]]
    note_resumed();
  if (accounting_.cut() || translator_) return false;
  aligner_.keep_rest(bytes_, chunk_at_);
  // One huge event (vLLM once sent the whole prompt's token ids): forward
  // it as it comes rather than hold megabytes.
  return aligner_.holding_too_much();
}

buffers response_relay::forward_held() {
  aligner_.plan(bytes_, chunk_at_, chunk_at_ + bytes_.size(), accounting_.drops(), pieces_);
  return frame(pieces_);
}

// The stream's first new content since its upstream failed has reached the client.
void response_relay::note_resumed() {
  auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - resumed_->failed_at);
  series_.time_to_resume.record_micros(static_cast<std::uint64_t>(micros.count()));
  resumed_ = nullptr;
}

void response_relay::held_forwarded() {
  if (!ctx_.client_gone) aligner_.keep_rest(bytes_, chunk_at_);
}

bool response_relay::turn_ends() {
  if (ctx_.client_gone || accounting_.cut()) return true;
  failure_ = ec_;
  return bool(ec_);
}

void response_relay::settle() {
  if (ctx_.streamed) env_.metrics.stream_active.sub();
  env_.metrics.stream_events_total.add(ctx_.sse_events);
  if (!ctx_.streamed) {
    ctx_.input_tokens = whole_usage_ ? whole_usage_->input_tokens() : std::nullopt;
    ctx_.output_tokens = whole_usage_ ? whole_usage_->output_tokens() : std::nullopt;
    if (whole_usage_) {
      ctx_.cached_tokens = whole_usage_->cached_tokens();
      ctx_.cache_write_tokens = whole_usage_->cache_write_tokens();
    }
    return;
  }
  ctx_.input_tokens = accounting_.facts().input_tokens;
  if (auto written = accounting_.facts().cache_write_tokens) ctx_.cache_write_tokens = written;
  ctx_.output_tokens = accounting_.output_tokens();
  ctx_.finish_reason = accounting_.facts().finish_reason;
}

response_relay::ending response_relay::how_it_ends() const {
  if (accounting_.cut()) return ending::cut;
  return failure_ || accounting_.upstream_error() ? ending::failed : ending::clean;
}

bool response_relay::suspends() {
  if (ctx_.client_gone || !accounting_.resumable() || s_.resumes_left <= 0) return false;
  const auto& facts = accounting_.facts();
  const bool failed = failure_ || accounting_.upstream_error();
  const bool unfinished = !failed && !accounting_.cut() && !facts.ended_properly();
  if (!failed && !unfinished) return false;
  // Text only, one choice, within the buffer, and something sent already.
  auto delivered = accounting_.client_text();
  if (ctx_.content_events == 0 || facts.tool_call_events > 0 || facts.reasoning_events > 0 ||
      facts.text_by_choice.size() > 1 || delivered.size() > plan_.resume.buffer_bytes ||
      !framing_.chunked || aligner_.forwarded() > sse_.boundary())
    return false;
  std::string_view reason = failure_ == beast::error::timeout ? "timeout"
                            : failure_                        ? "reset"
                            : accounting_.upstream_error()    ? "error_event"
                                                              : "unfinished";
  s_.suspended = std::make_unique<upstream::suspended_stream>(
      upstream::suspended_stream{std::move(delivered), framing_.client_keep_alive, reason,
                                 accounting_.take_identity(), ctx_.content_events, clock::now()});
  ++ctx_.failed_attempts;  // (what it generated, text caught up with included)
  ctx_.failed_attempts_output += std::max<std::uint64_t>(
      facts.content_events, static_cast<std::uint64_t>(facts.output_tokens.value_or(0)));
  spdlog::info("request {}: upstream {} failed after {} tokens ({}); resuming the stream",
               ctx_.request_id, a_.settings->name, ctx_.content_events, s_.suspended->reason);
  upstream().close();
  s_.upstream.reset();
  return true;
}

// The upstream went past the limit: end the stream as the engine should
// have, and stop the generation.
net::awaitable<bool> response_relay::finish_cut() {
  if (accounting_.diverged()) {
    bool keep = co_await finish_diverged();
    co_return keep;
  }
  ctx_.limit_enforced = true;
  env_.metrics.limit_enforced.add();
  upstream().close();
  s_.upstream.reset();
  std::string tail;
  if (translator_)
    translator_->on_cut(*plan_.output_limit, tail);
  else
    tail = make_limit_final_events(ctx_.dialect, *plan_.output_limit);
  if (cut_mid_event_) tail.insert(0, "\n\n");  // end the half-sent event first
  if (!co_await write_last_chunks(tail)) co_return false;
  co_return framing_.client_keep_alive;
}

net::awaitable<bool> response_relay::finish_clean() {
  if (translator_ && ctx_.streamed && !last_chunk_sent_) {
    // What the client's dialect still owes a stream the upstream ended
    // without its terminator (an unfinished event is dropped, as the spec says).
    translated_.clear();
    translator_->on_end(translated_);
    if (plan_.copy) [[unlikely]]
      copy_for_cache(translated_);
    pieces_.clear();
    if (!translated_.empty()) pieces_.emplace_back(translated_.data(), translated_.size());
    if (!write_now(frame(pieces_))) {
      if (!co_await send_rest()) co_return false;
    }
    if (ctx_.client_gone) co_return false;
  } else if (!translator_ && ctx_.streamed && aligner_.forwarded() < sse_.fed()) {
    // The body ended inside an event: pass the tail on as it was sent (a
    // client discards an unfinished event, as the spec says).
    aligner_.plan({}, sse_.fed(), sse_.fed(), accounting_.drops(), pieces_);
    if (!write_now(frame(pieces_))) {
      if (!co_await send_rest()) co_return false;
    }
    if (ctx_.client_gone) co_return false;
  }
  if (ctx_.streamed && sse_.fed() > 0 && sse_.events_dispatched() == 0) {
    bool keep_alive = co_await finish_not_sse();
    co_return keep_alive;
  }
  if (framing_.chunked && !last_chunk_sent_) {
    if (!write_now(buffers(&last_chunk, 1))) {
      if (!co_await send_rest()) co_return false;
    }
    if (ctx_.client_gone) co_return false;
  }
  s_.finished = true;  // from here on the watcher must not touch the connection
  // Bytes past the answer's end: the upstream and the proxy disagree on
  // where it ended (a wrong length, or an answer smuggled after it), and
  // whatever they are must not answer the connection's next request.
  if (up_buffer_.size() > decoded_) {
    spdlog::warn(
        "request {}: upstream '{}' sent {} bytes past the end of its answer; its connection is "
        "closed",
        ctx_.request_id, a_.settings->name, up_buffer_.size() - decoded_);
    upstream().close();
  } else if (a_.head.keep_alive()) {
    a_.from->release(std::move(s_.upstream));
  }
  co_return framing_.client_keep_alive;
}

// Bytes, but not one event: whatever the upstream sent, it was not an
// event stream. Passed on as it came, then said plainly, and counted as a
// failed stream rather than a success.
net::awaitable<bool> response_relay::finish_not_sse() {
  ctx_.upstream_failed_midstream = true;
  env_.metrics.downstream_rq_stream_failed.add();
  ctx_.error = request_error::upstream(
      502, "upstream_invalid_stream",
      "upstream '" + a_.settings->name + "' sent a body that is not an event stream", false);
  spdlog::warn("request {}: {}", ctx_.request_id, ctx_.error->message);
  upstream().close();
  if (!framing_.chunked) co_return false;
  std::string tail = "\n\n" + make_error_event(ctx_.dialect, "upstream_error", ctx_.error->code,
                                               ctx_.error->message);
  if (!co_await write_last_chunks(tail)) co_return false;
  s_.finished = true;
  co_return framing_.client_keep_alive;
}

// A resumed stream whose new text differs from what the client has: ended
// where it diverged with a clean, retryable error event, never a spliced
// answer.
net::awaitable<bool> response_relay::finish_diverged() {
  ctx_.upstream_failed_midstream = true;
  env_.metrics.downstream_rq_stream_failed.add();
  ctx_.error = request_error::upstream(
      502, "resume_diverged",
      "the stream's upstream failed, and its answer could not be resumed: the new attempt's "
      "text differs from what was sent (try the request again)",
      true);
  upstream().close();
  s_.upstream.reset();
  std::string tail = aligner_.forwarded() > sse_.boundary() ? "\n\n" : "";
  tail += make_error_event(ctx_.dialect, "upstream_error", ctx_.error->code, ctx_.error->message);
  if (!co_await write_last_chunks(tail)) co_return false;
  co_return framing_.client_keep_alive;
}

// The upstream failed after the answer began: no retry is possible. An SSE
// client gets an error event in its dialect and a properly ended body,
// never a clean end that looks like a complete answer.
net::awaitable<bool> response_relay::finish_failed() {
  ctx_.upstream_failed_midstream = true;
  env_.metrics.downstream_rq_stream_failed.add();
  bool timeout = failure_ == beast::error::timeout;
  if (timeout) env_.metrics.upstream_rq_timeout.add();
  auto reason = upstream::upstream_error_for(failure_, *a_.settings, false);
  reason.code = timeout ? "upstream_timeout" : "upstream_disconnected";
  if (!failure_)  // (an error event, held back for a resume that could not be)
    reason = request_error::upstream(
        502, "upstream_error", "upstream '" + a_.settings->name + "' failed mid-stream", false);
  reason.retryable = false;
  ctx_.error = reason;
  spdlog::warn("request {}: upstream {} failed mid-stream: {}", ctx_.request_id, a_.settings->name,
               failure_.message());
  upstream().close();
  if (!ctx_.streamed || !framing_.chunked)
    co_return false;  // a cut connection is the only honest signal left
  // Whole events only reached the client, unless one huge event was being
  // passed through: then close it first.
  std::string tail = aligner_.forwarded() > sse_.boundary() ? "\n\n" : "";
  if (translator_)
    translator_->on_failure(reason, tail);
  else
    tail += make_error_event(ctx_.dialect, "upstream_error", reason.code, reason.message);
  if (!co_await write_last_chunks(tail)) co_return false;
  co_return framing_.client_keep_alive;
}

net::awaitable<bool> response_relay::finish() {
  if (client_gone()) co_return false;
  if (holding()) {  // no content came: the next target's turn, or what was held goes now
    if (abandons()) co_return false;
    if (!write_now(release_held())) {
      if (!co_await send_rest()) co_return false;
    }
    if (client_gone()) co_return false;
  }
  if (head_pending()) {  // no body came (or none that was written): the head still goes first
    if (!write_now(head_alone())) {
      if (!co_await send_rest()) co_return false;
    }
    if (client_gone()) co_return false;
  }
  bool keep_alive = false;
  const auto how = how_it_ends();
  if (how != ending::cut && suspends()) co_return false;
  if (how == ending::cut)
    keep_alive = co_await finish_cut();
  else if (how == ending::clean)
    keep_alive = co_await finish_clean();
  else
    keep_alive = co_await finish_failed();
  co_return keep_alive;
}

// A translated answer is kept as its client read it, in the client's
// dialect; but not a chat stream without its usage chunk (the translation
// writes it only where the client asked, and a hit asked with it, or whole,
// needs it).
bool may_keep_translated(const request_context& ctx, const upstream::answer& answer,
                         const upstream::exchange_plan& plan, const answer_translator* translator) {
  if (!translator || ctx.dialect != dialect::openai_chat || plan.usage_asked) return true;
  // (ctx.streamed is not yet known: the answer's head says)
  return !answer.head.value_of(known_field::content_type).starts_with("text/event-stream");
}

}  // namespace

net::awaitable<bool> relay_response(upstream::exchange_state& s, upstream::answer& answer,
                                    const upstream::exchange_plan& plan, const relay_env& env,
                                    bool client_keep_alive, unsigned client_http_version,
                                    answer_translator* translator,
                                    const upstream::suspended_stream* resumed) {
  if (plan.copy) [[unlikely]]  // (this attempt's answer is the one a cache would keep)
    *plan.copy = {{}, plan.copy->limit, may_keep_translated(s.ctx, answer, plan, translator)};
  if (translator &&
      !answer.head.value_of(known_field::content_type).starts_with("text/event-stream")) {
    bool keep =
        co_await relay_whole_translated(s, answer, plan, env, client_keep_alive, *translator);
    co_return keep;
  }
  response_relay relay(s, answer, plan, env, client_keep_alive, client_http_version, translator,
                       resumed);
  while (!relay.body_done()) {
    if (!relay.take_part()) {
      if (relay.head_pending()) {  // the head came without events: it goes now, before the wait
        if (!relay.write_now(relay.head_alone())) {
          if (!co_await relay.send_rest()) break;
        }
        if (relay.client_gone()) break;
      }
      auto into = relay.prepare_read();
      error_code ec;
      std::size_t n = 0;
      if (!relay.read_now(into, ec, n)) {
        relay.arm_idle_deadline();
        if (relay.plain_upstream())
          std::tie(ec, n) = co_await relay.plain_upstream()->async_read_some(into, deferred_tuple);
        else
          std::tie(ec, n) = co_await relay.upstream().async_read_some(into, deferred_tuple);
        relay.upstream()
            .expires_never();  // (while the client is written to, the upstream may wait)
      }
      relay.read_done(ec, n);
    }
    if (relay.has_bytes()) {
      if (!relay.write_now(relay.forward())) {
        if (!co_await relay.send_rest()) break;
      }
      if (relay.after_forward()) {
        if (!relay.write_now(relay.forward_held())) {
          if (!co_await relay.send_rest()) break;
        }
        relay.held_forwarded();
      }
    }
    if (relay.turn_ends()) break;
  }
  relay.settle();
  bool keep_alive = co_await relay.finish();
  co_return keep_alive;
}

}  // namespace tokengate::stream
