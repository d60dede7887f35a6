#pragma once
// A resumed stream, as its client reads it: one stream, whatever number of
// attempts it took. The new attempt's opening is held back by the
// accounting while it catches up (stream/accounting.hpp); what follows is
// passed on with the new attempt's ids replaced by those the client
// already has (a chat chunk's id, a Responses response's and items' ids)
// and, in the Responses API, its events numbered on from the client's
// last sequence_number. A translated stream needs none of it: its
// translator is kept across attempts and names the stream itself.
#include <cstdint>
#include <string>
#include <string_view>

#include "http/dialect.hpp"
#include "stream/answer_translator.hpp"
#include "upstream/exchange.hpp"

namespace tokengate::stream {

// What `event` says of its stream's names, added to `into` (the first id
// seen is kept; Responses' items by output_index; the last sequence number).
void learn_identity(dialect d, const sse_event& event, upstream::stream_identity& into);

class resume_splice final : public answer_translator {
 public:
  // `client`: the names the client has. `usage_injected`: the usage-only
  // chunk was asked for on the client's behalf (not passed on).
  resume_splice(dialect d, upstream::stream_identity client, bool usage_injected);

  dialect upstream_dialect() const override { return dialect_; }
  void on_resumed() override {
    attempt_ = {};
    prefilled_tokens_ = 0;
  }
  // This attempt continues a prefill of `tokens` tokens (resume: prefill):
  // its usage counts them as the completion's, not the prompt's.
  void prefilled(std::size_t tokens) { prefilled_tokens_ = static_cast<std::int64_t>(tokens); }
  void on_held_back(const sse_event& event) override { learn_identity(dialect_, event, attempt_); }
  void on_event(const sse_event& event, std::string& out) override;
  void on_end(std::string&) override {}
  void on_cut(long long limit, std::string& out) override;
  void on_failure(const request_error& why, std::string& out) override;
  void whole(unsigned&, std::string&) override {}  // (a resume continues event streams only)

 private:
  std::string renamed(std::string_view data);

  dialect dialect_;
  upstream::stream_identity client_;
  upstream::stream_identity attempt_;  // the new attempt's own names
  std::int64_t next_sequence_ = 0;
  std::int64_t prefilled_tokens_ = 0;
  bool usage_injected_;
};

}  // namespace tokengate::stream
