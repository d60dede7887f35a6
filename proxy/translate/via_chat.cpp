#include "translate/via_chat.hpp"

namespace tokengate::translate {
namespace {

// Each chat chunk the first step wrote, handed to the second.
class second_step final : public stream::sse_sink {
 public:
  second_step(stream::answer_translator& to_client, std::string& out)
      : to_client_(to_client), out_(out) {}
  void on_event(const stream::sse_event& event) override { to_client_.on_event(event, out_); }

 private:
  stream::answer_translator& to_client_;
  std::string& out_;
};

}  // namespace

via_chat::via_chat(std::unique_ptr<stream::answer_translator> from_upstream,
                   std::unique_ptr<stream::answer_translator> to_client)
    : from_upstream_(std::move(from_upstream)), to_client_(std::move(to_client)) {}

void via_chat::pass_on(std::string& out) {
  if (chunks_.empty()) return;
  second_step sink(*to_client_, out);
  parser_.feed(chunks_, sink);
  chunks_.clear();
}

void via_chat::on_event(const stream::sse_event& event, std::string& out) {
  from_upstream_->on_event(event, chunks_);
  pass_on(out);
}

void via_chat::on_end(std::string& out) {
  from_upstream_->on_end(chunks_);
  pass_on(out);
  to_client_->on_end(out);
}

void via_chat::on_cut(long long limit, std::string& out) {
  // (the first step's closing chunks say the finish and the usage so far;
  // the second's cut then closes whatever they left open)
  from_upstream_->on_cut(limit, chunks_);
  pass_on(out);
  to_client_->on_cut(limit, out);
}

void via_chat::on_failure(const request_error& why, std::string& out) {
  to_client_->on_failure(why, out);  // (the client's error event, said once)
}

void via_chat::on_resumed() {
  from_upstream_->on_resumed();
  to_client_->on_resumed();
}

void via_chat::on_held_back(const stream::sse_event& event) { from_upstream_->on_held_back(event); }

void via_chat::whole(unsigned& status, std::string& body) {
  from_upstream_->whole(status, body);
  to_client_->whole(status, body);
}

}  // namespace tokengate::translate
