#pragma once
// Two answer translations chained through OpenAI's chat completions:
// `from_upstream` turns the upstream's answer into chat chunks (asked to
// send the usage chunk, which the second step reads), `to_client` turns
// those into the client's dialect. tokengate translates Responses ↔
// Anthropic messages directly (translate/responses_from_anthropic.hpp,
// translate/anthropic_from_responses.hpp); the tests check that the
// direct translations say what the two that exist with chat say in a row.
#include <memory>
#include <string>

#include "stream/answer_translator.hpp"
#include "stream/sse_parser.hpp"

namespace tokengate::test {

class via_chat final : public stream::answer_translator {
 public:
  via_chat(std::unique_ptr<stream::answer_translator> from_upstream,
           std::unique_ptr<stream::answer_translator> to_client)
      : from_upstream_(std::move(from_upstream)), to_client_(std::move(to_client)) {}

  dialect upstream_dialect() const override { return from_upstream_->upstream_dialect(); }
  void on_event(const stream::sse_event& event, std::string& out) override {
    from_upstream_->on_event(event, chunks_);
    pass_on(out);
  }
  void on_end(std::string& out) override {
    from_upstream_->on_end(chunks_);
    pass_on(out);
    to_client_->on_end(out);
  }
  // (the first step's closing chunks say the finish and the usage so far;
  // the second's cut then closes whatever they left open)
  void on_cut(long long limit, std::string& out) override {
    from_upstream_->on_cut(limit, chunks_);
    pass_on(out);
    to_client_->on_cut(limit, out);
  }
  void on_failure(const request_error& why, std::string& out) override {
    to_client_->on_failure(why, out);  // (the client's error event, said once)
  }
  void whole(unsigned& status, std::string& body) override {
    from_upstream_->whole(status, body);
    to_client_->whole(status, body);
  }

 private:
  struct second_step final : stream::sse_sink {
    stream::answer_translator* to_client;
    std::string* out;
    void on_event(const stream::sse_event& event) override { to_client->on_event(event, *out); }
  };
  void pass_on(std::string& out) {
    second_step sink;
    sink.to_client = to_client_.get();
    sink.out = &out;
    parser_.feed(chunks_, sink);
    chunks_.clear();
  }

  std::unique_ptr<stream::answer_translator> from_upstream_, to_client_;
  stream::sse_parser parser_;
  std::string chunks_;  // the first step's output for one upstream event
};

}  // namespace tokengate::test
