#pragma once
// The resume phase around the exchange (a route's `resume:`): a client's
// stream that its relay left suspended after its upstream failed
// mid-answer (stream/relay.hpp) is continued from a new attempt, the same
// target first. This says how: a prefill of what the client has
// (resume/prefill_request.hpp) where the route asks for it and the
// target's API allows it, else a restart caught up with it; through which
// translation (stream/resume_splice.hpp); and counts each resume's end.
#include <memory>
#include <optional>
#include <string_view>

#include "http/client_request.hpp"
#include "http/request_context.hpp"
#include "stream/answer_translator.hpp"
#include "stream/resume_splice.hpp"
#include "upstream/exchange.hpp"

namespace tokengate {

class worker;

class resumption {
 public:
  resumption(worker& w, upstream::exchange_state& s, const upstream::exchange_plan& plan);

  // The stream being resumed (null: the first answer, or one after a
  // failure before any content).
  const upstream::suspended_stream* stream() const { return resumed_.get(); }
  // Before the answer from `from` on is opened: a prefill's request.
  void before_attempt(const client_request& request, std::size_t from);
  // The answer refuses the prefill (a 4xx): it is dropped, and the same
  // target is asked again in restart mode.
  bool prefill_refused(const upstream::answer& got);
  // The translation the answer goes through: a kept one for a resumed
  // stream, else the target's own (null: none).
  stream::answer_translator* translator_for(const upstream::answer& got);
  // Whether the answer can continue the client's stream (a 200 event stream
  // in the dialect the stream was read in).
  bool continues(const upstream::answer& got) const;
  // After a relay: the attempt to open next, if any. A suspended stream is
  // resumed on the same target first; an answer given up before its first
  // token hands over to the next target.
  std::optional<std::size_t> next_attempt(const upstream::answer& got);
  // No attempt could continue the stream.
  void failed();

 private:
  std::string_view mode_of(const upstream::answer& got) const;
  void count(std::string_view result);

  worker& w_;
  upstream::exchange_state& s_;
  const upstream::exchange_plan& plan_;
  std::unique_ptr<upstream::suspended_stream> resumed_;
  std::string_view mode_;  // the resumed attempt's
  bool prefill_refused_ = false;
  std::unique_ptr<stream::answer_translator> translator_;
};

}  // namespace tokengate
