#pragma once
// One request's exchange with its upstreams, up to an answer that may reach
// the client: the planned targets tried in order, falling back (with a
// jittered backoff) only while nothing has reached the client, and a
// pooled connection that turns out stale retried once on a new one. It
// ends with an answer's head read, for the relay (stream/relay.hpp), or
// with the error to answer the client with.
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "http/client_request.hpp"
#include "http/dialect.hpp"
#include "http/request_context.hpp"
#include "http/request_error.hpp"
#include "http/response_head.hpp"
#include "io/any_stream.hpp"
#include "io/client_watcher.hpp"
#include "io/net.hpp"
#include "metrics/counters.hpp"
#include "upstream/body_edits.hpp"
#include "upstream/pool.hpp"
#include "upstream/worker_upstreams.hpp"

namespace tokengate::upstream {

struct translated_attempt {
  std::string target;  // e.g. /v1/messages, as the client would write it
  dialect answers_in;
};

// The answer's body as its client reads it (de-chunked), for the response
// cache (cache/): the upstream's bytes, or for a translated answer the
// translation, in the client's dialect. Kept only while within `limit`
// bytes; the attempt that answers last is the one kept.
struct answer_copy {
  std::string bytes;
  std::size_t limit = 0;
  bool usable = true;  // false: past the limit, or not to be kept
  // A stream's: when its bytes came (bytes[previous end, end) `at` after
  // the first read), for a hit replayed at the original's pace.
  struct mark {
    std::size_t end;
    std::chrono::milliseconds at;
  };
  std::vector<mark> marks;
  std::chrono::steady_clock::time_point first{};
};

struct exchange_plan {
  std::shared_ptr<const config::config> config;    // the snapshot this request runs on
  std::vector<const config::upstream*> upstreams;  // attempt order; more than one = fallback
  // The changes to the request body for each attempt, sorted
  // (routing::edits_for_target); none means the body goes as the client sent
  // it. Worked out before the exchange, so that nothing of the policy's
  // reading of the body stays alive for the length of a stream.
  std::vector<std::vector<splice>> edits;
  // For each attempt, where its upstream speaks the other API than the
  // client (translate/): the path the translated request goes to, and the
  // dialect the answer comes in. Empty: the client's request as it is.
  std::vector<std::optional<translated_attempt>> translations;
  std::vector<std::string> models;  // the model name each attempt sends (for its trace span)
  bool usage_asked = false;         // the client asked for usage (a translated answer honours it)
  std::optional<long long> output_limit;                              // enforced on the stream
  std::vector<std::pair<std::string, std::string>> response_headers;  // e.g. the clamp notice
  std::chrono::milliseconds retry_backoff{0};
  config::retry_settings retry;    // the route's: same-target retries (upstream/retry_policy.hpp)
  config::resume_settings resume;  // the route's: streams continued after a mid-answer failure
  // The first attempt's connection when the body was forwarded while it
  // arrived (server/early_forward.hpp): it holds all of the request but
  // the body's last byte. Or the failure to connect met then.
  std::optional<acquire_result> first_connection;
  // Set on a route with a response cache, for a request it may keep.
  std::unique_ptr<answer_copy> copy;
};

// A client's stream whose upstream failed after content reached it, kept
// open to be continued from another attempt (exchange_plan::resume;
// stream/relay.hpp): the text the client has, and how the stream ended.
// What names a stream to its client: a new attempt's own ids are
// replaced by these, so that the client reads one stream
// (stream/resume_splice.hpp).
struct stream_identity {
  std::string id;  // the chunk id (chat), the response's (Responses), the message's (Anthropic)
  std::map<std::int64_t, std::string> item_ids;  // Responses: each output item's, by output_index
  std::optional<std::int64_t> last_sequence;     // Responses: the last sequence_number sent
};

struct suspended_stream {
  std::string delivered;
  bool client_keep_alive = true;
  std::string_view reason;  // reset, timeout, error_event, unfinished
  stream_identity identity;
  std::size_t delivered_tokens = 0;                 // the content events the client has
  std::chrono::steady_clock::time_point failed_at;  // (the time to resume is measured from here)
};

// resume: prefill. The attempt that continues a suspended stream from
// what its client has, and its body (resume/prefill_request.hpp) in
// place of the plan's edits for that attempt.
struct prefill_attempt {
  std::size_t attempt = 0;
  std::vector<splice> edits;
};

// What one exchange shares with the client watcher (io/client_watcher.hpp),
// which runs beside it on the same thread and calls client_gone.
struct exchange_state final : client_gone_hook {
  exchange_state(any_stream& c, request_context& context) : client(c), ctx(context) {}

  any_stream& client;
  request_context& ctx;
  std::unique_ptr<connection> upstream;
  bool finished = false;  // the exchange is over: the watcher must stop
  // The relay gave the answer up before its first token, nothing of it
  // sent (timeouts.first_token, stream/relay.hpp): why; the next target's turn.
  std::unique_ptr<request_error> abandoned;  // (pointers: set rarely, kept per stream)
  // … and the same target is asked again (a whole answer cut mid-body,
  // once per request), not the next.
  bool retry_same_target = false, whole_retried = false;
  // The relay left the client's stream open after its upstream failed
  // mid-answer, to be resumed (`resumes_left` more times at most).
  std::unique_ptr<suspended_stream> suspended;
  int resumes_left = 0;
  std::unique_ptr<prefill_attempt> prefill;  // (a resume of mode prefill under way)
  bool prefills(std::size_t attempt) const { return prefill && prefill->attempt == attempt; }

  // Close the upstream now, so that the engine stops generating. Not once
  // the exchange is over: the connection may be back in the pool.
  void client_gone() override {
    if (finished) return;
    ctx.client_gone = true;
    if (upstream) upstream->stream.close();
  }
  // A write to the client failed: it is gone, and so must the upstream be,
  // so that the engine stops generating.
  void client_write_failed() {
    ctx.client_gone = true;
    if (upstream) upstream->stream.close();
  }
};

// An upstream's answer whose head has been read, and that may reach the
// client (a 5xx or 429 reaches it only from the last target). Its
// connection is the exchange_state's.
struct answer {
  pool* from = nullptr;
  const config::upstream* settings = nullptr;
  response_head head;
  beast::flat_buffer buffer;                       // the head's read: it may hold the first events
  std::chrono::steady_clock::time_point deadline;  // the request's total on this upstream
  std::size_t* in_flight =
      nullptr;              // this worker's streams on the upstream (max_concurrent_streams)
  std::size_t attempt = 0;  // the plan's attempt that answered
};

// A stream counted in flight on its upstream while it lives.
class in_flight {
 public:
  explicit in_flight(std::size_t& count) : count_(count) { ++count_; }
  ~in_flight() { --count_; }
  in_flight(const in_flight&) = delete;
  in_flight& operator=(const in_flight&) = delete;

 private:
  std::size_t& count_;
};

// Tries the plan's upstreams until one answers: then `got` holds the answer
// (filled in place: its head's views point into its own bytes) and nothing
// is returned; else the error to answer the client with. When the client
// went away meanwhile (ctx.client_gone), neither is to be used.
// `first_attempt`: the plan's target to begin with (after one whose answer
// was given up before its first token).
net::awaitable<std::optional<request_error>> open_answer(exchange_state& s,
                                                         const client_request& request,
                                                         exchange_plan& plan,
                                                         worker_upstreams& upstreams,
                                                         metrics::shard& metrics, answer& got,
                                                         std::size_t first_attempt = 0);

// The error an upstream's failure is to the client: 504 for a timeout,
// 502 for the rest.
request_error upstream_error_for(const error_code& ec, const config::upstream& u,
                                 bool waiting_first_byte);

}  // namespace tokengate::upstream
