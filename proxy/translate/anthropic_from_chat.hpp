#pragma once
// An OpenAI chat answer for an Anthropic Messages client: the first chunk
// opens the message (message_start), content and reasoning deltas open
// text and thinking blocks and stream into them, each tool call opens a
// tool_use block whose argument fragments stream as input_json_delta, the
// finish_reason becomes the stop_reason, and the usage chunk the usage of
// message_delta, sent with message_stop at `[DONE]` (the usage follows
// the finish in OpenAI's stream; Anthropic's says both at once).
#include <boost/json/object.hpp>
#include <cstdint>
#include <map>
#include <string>

#include "stream/answer_translator.hpp"

namespace tokengate::translate {

class anthropic_from_chat : public stream::answer_translator {
 public:
  // `model`: the name the client asked for (until the upstream names one).
  explicit anthropic_from_chat(std::string model);

  dialect upstream_dialect() const override { return dialect::openai_chat; }
  void on_event(const stream::sse_event& event, std::string& out) override;
  void on_end(std::string& out) override;
  void on_cut(long long limit, std::string& out) override;
  void on_failure(const request_error& why, std::string& out) override;
  void whole(unsigned& status, std::string& body) override;

 protected:
  // (what anthropic_from_responses, which writes the same events from
  // another API's, uses)
  void chunk(const boost::json::object& c, std::string& out);
  void start_message(const boost::json::object& c, std::string& out);
  void delta(const boost::json::object& d, std::string& out);
  void tool_call(const boost::json::object& call, std::string& out);
  void read_usage(const boost::json::object* usage);
  void error(const boost::json::object& e, std::string& out);

  enum class block { none, text, thinking, tool };
  void open_block(block kind, std::string& out, std::string_view tool_id = {},
                  std::string_view tool_name = {});
  void close_block(std::string& out);
  void block_delta(int index, std::string_view type, std::string_view field, std::string_view piece,
                   std::string& out);
  void stop(std::string& out);

  std::string model_;
  bool started_ = false, stopped_ = false;
  block open_ = block::none;
  int open_index_ = -1;
  int blocks_ = 0;
  std::map<std::int64_t, int> tool_block_;  // tool call index → its block
  std::string stop_reason_;
  std::int64_t prompt_ = 0, cached_ = 0, output_ = 0;
};

// The stop_reason Anthropic gives for an OpenAI finish_reason.
std::string_view stop_reason_for(std::string_view finish_reason);

}  // namespace tokengate::translate
