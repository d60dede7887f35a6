#pragma once
// An answer in another API than the client's, rewritten on its way (the
// translations themselves live in translate/, above this layer). The
// relay hands it each upstream event as the event completes and writes
// what it returns at once: a translation holds no event back. The
// accounting (TTFT, the output limit, usage) reads the upstream's own
// events, exactly as on a stream in the client's dialect.
#include <string>

#include "http/dialect.hpp"
#include "http/request_error.hpp"
#include "stream/sse_parser.hpp"

namespace tokengate::stream {

class answer_translator {
 public:
  virtual ~answer_translator() = default;

  // The dialect the upstream answers in.
  virtual dialect upstream_dialect() const = 0;
  // One upstream event: the client's events for it appended to `out`
  // (none for an event without a counterpart, e.g. Anthropic's ping).
  virtual void on_event(const sse_event& event, std::string& out) = 0;
  // The upstream's body ended where no terminator of its own did (some
  // engines end a stream with the connection): whatever the client's
  // dialect still owes it.
  virtual void on_end(std::string& out) = 0;
  // The stream is cut at the output limit: the client's closing events.
  virtual void on_cut(long long limit, std::string& out) = 0;
  // The upstream failed mid-stream: the client's error event.
  virtual void on_failure(const request_error& why, std::string& out) = 0;
  // A resumed stream (stream/resume_splice.hpp) goes on from a new
  // attempt: the translation goes on where it was, and the new attempt's
  // events that repeat what the client has are only shown to it
  // (on_held_back), never translated.
  virtual void on_resumed() {}
  virtual void on_held_back(const sse_event&) {}
  // A whole answer (a completion that was not streamed, or an error): the
  // client's status and body in place of the upstream's.
  virtual void whole(unsigned& status, std::string& body) = 0;
};

}  // namespace tokengate::stream
