#pragma once
// An answer translated in two steps, through OpenAI's chat completions:
// `from_upstream` turns the upstream's answer into chat chunks (asking
// the usage chunk always, since the second step reads the usage from it),
// `to_client` turns those into the client's dialect. Where no direct
// translation exists (Responses ↔ Anthropic messages), the two that
// exist with chat are chained. The chunks between them are our own
// (written by the first, one whole event per chunk) and never reach the
// client; the accounting reads the upstream's own events, as on any
// translated stream.
#include <memory>
#include <string>

#include "stream/answer_translator.hpp"
#include "stream/sse_parser.hpp"

namespace tokengate::translate {

class via_chat final : public stream::answer_translator {
 public:
  via_chat(std::unique_ptr<stream::answer_translator> from_upstream,
           std::unique_ptr<stream::answer_translator> to_client);

  dialect upstream_dialect() const override { return from_upstream_->upstream_dialect(); }
  void on_event(const stream::sse_event& event, std::string& out) override;
  void on_end(std::string& out) override;
  void on_cut(long long limit, std::string& out) override;
  void on_failure(const request_error& why, std::string& out) override;
  void on_resumed() override;
  void on_held_back(const stream::sse_event& event) override;
  void whole(unsigned& status, std::string& body) override;

 private:
  // The chunks the first step wrote (in chunks_), through the second.
  void pass_on(std::string& out);

  std::unique_ptr<stream::answer_translator> from_upstream_, to_client_;
  stream::sse_parser parser_;
  std::string chunks_;  // reused: the first step's output for one upstream event
};

}  // namespace tokengate::translate
