#pragma once
// An OpenAI Responses answer for an OpenAI chat client: response.created
// becomes the role chunk, output_text deltas content deltas, reasoning
// (summary or text) deltas reasoning_content deltas, each function_call
// item a tool call whose arguments stream as its
// function_call_arguments deltas. The terminal event ends the stream:
// response.completed with finish_reason stop (tool_calls when the model
// called a tool), response.incomplete with length (content_filter when
// that is why), each then the usage chunk (when the client asked for it,
// cached and reasoning tokens included) and `[DONE]`; response.failed and
// an `error` event become chat's error event. The other events (the
// .done ones, content parts, in_progress) have no counterpart.
#include <boost/json/object.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "stream/answer_translator.hpp"

namespace tokengate::translate {

class chat_from_responses final : public stream::answer_translator {
 public:
  // `usage_asked`: the client's stream_options.include_usage. `created`:
  // the chunks' Unix time (now; tests fix it, to compare two translations).
  explicit chat_from_responses(bool usage_asked, std::optional<std::int64_t> created = {});

  dialect upstream_dialect() const override { return dialect::openai_responses; }
  void on_event(const stream::sse_event& event, std::string& out) override;
  void on_end(std::string& out) override;
  void on_cut(long long limit, std::string& out) override;
  void on_failure(const request_error& why, std::string& out) override;
  void whole(unsigned& status, std::string& body) override;

 private:
  void event(std::string_view type, const boost::json::object& e, std::string& out);
  void start(const boost::json::object* response, std::string& out);
  void item_added(const boost::json::object& e, std::string& out);
  void item_done(const boost::json::object& e, std::string& out);
  void arguments(const boost::json::object& e, std::string& out);
  struct call {
    int index;      // the chat tool call's
    bool streamed;  // some of its arguments told
  };
  void argument_fragment(call& c, std::string_view fragment, std::string& out);
  void finish(const boost::json::object* response, std::string_view finish_reason,
              std::string& out);
  void failed(const boost::json::object* error, std::string& out);
  void read_usage(const boost::json::object* usage);

  void chunk_header(std::string& out);
  void open_chunk(std::string& out);
  void close_chunk(std::string& out, std::string_view finish_reason);
  void text_chunk(std::string_view member, std::string_view text, std::string& out);
  void usage_chunk(std::string& out);

  bool usage_asked_;
  std::string id_ = "chatcmpl-tokengate";
  std::string model_;
  std::string created_;
  std::map<std::int64_t, call> tool_index_;  // output_index → the tool call
  int tools_ = 0;
  std::int64_t input_ = 0, cached_ = 0, output_ = 0, reasoning_ = 0;
  bool started_ = false, done_ = false;
};

}  // namespace tokengate::translate
