#pragma once
// An Anthropic Messages answer for an OpenAI chat client: message_start
// becomes the role chunk, text and thinking deltas become content and
// reasoning_content deltas, a tool_use block a tool call whose arguments
// stream as its input_json_delta fragments, message_delta's stop_reason
// the finish_reason, the usage the usage chunk (when the client asked for
// it), message_stop `[DONE]`; ping and signatures have no counterpart.
#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "stream/answer_translator.hpp"

namespace tokengate::translate {

class chat_from_anthropic final : public stream::answer_translator {
 public:
  // `usage_asked`: the client's stream_options.include_usage. `created`:
  // the chunks' Unix time (now; tests fix it, to compare two translations).
  explicit chat_from_anthropic(bool usage_asked, std::optional<std::int64_t> created = {});

  dialect upstream_dialect() const override { return dialect::anthropic_messages; }
  void on_event(const stream::sse_event& event, std::string& out) override;
  void on_end(std::string& out) override;
  void on_cut(long long limit, std::string& out) override;
  void on_failure(const request_error& why, std::string& out) override;
  void whole(unsigned& status, std::string& body) override;

 private:
  void message_start(const boost::json::object& e, std::string& out);
  void block_start(const boost::json::object& e, std::string& out);
  void block_delta(const boost::json::object& e, std::string& out);
  void message_delta(const boost::json::object& e, std::string& out);
  void message_stop(std::string& out);
  void read_usage(const boost::json::object* usage);

  void chunk_header(std::string& out);
  // A chunk's opening up to its delta, and its closing after it.
  void open_chunk(std::string& out);
  void close_chunk(std::string& out, std::string_view finish_reason);
  void usage_chunk(std::string& out);

  bool usage_asked_;
  std::string id_ = "chatcmpl-tokengate";
  std::string model_;
  std::string created_;
  std::map<std::int64_t, int> tool_index_;  // content block → tool call index
  int tools_ = 0;
  std::int64_t input_ = 0, cache_read_ = 0, cache_written_ = 0, output_ = 0;
  bool finished_ = false, done_ = false;
};

// The finish_reason OpenAI gives for an Anthropic stop_reason.
std::string_view finish_reason_for(std::string_view stop_reason);

}  // namespace tokengate::translate
