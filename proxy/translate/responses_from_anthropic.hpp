#pragma once
// An Anthropic Messages answer for a Responses client, event by event:
// the same Responses events as responses_from_chat writes (it is that
// writer, fed another API's events), without passing through chat chunks
// (a translation chained through chat parses every event twice).
// message_start opens the response; text and thinking deltas stream into
// a message item and a reasoning item's summary; each tool_use block is a
// function_call item whose arguments stream from its input_json_delta
// fragments; message_delta's stop_reason closes every item
// (max_tokens: incomplete) and message_stop ends the response. An error
// event is response.failed. Whole answers go through chat
// (chat_from_anthropic, then responses_from_chat): their cost is per
// answer, not per event.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "translate/responses_from_chat.hpp"

namespace tokengate::translate {

class responses_from_anthropic final : public responses_from_chat {
 public:
  // (as responses_from_chat's)
  explicit responses_from_anthropic(std::string model, std::optional<std::int64_t> created_at = {},
                                    std::string hex = {});

  dialect upstream_dialect() const override { return dialect::anthropic_messages; }
  void on_event(const stream::sse_event& event, std::string& out) override;
  void whole(unsigned& status, std::string& body) override;

 private:
  void message_start(const boost::json::object& e, std::string& out);
  void block_start(const boost::json::object& e, std::string& out);
  void block_delta(const boost::json::object& e, std::string& out);
  void message_delta(const boost::json::object& e, std::string& out);
  void read_anthropic_usage(const boost::json::object* usage);

  std::map<std::int64_t, int> tool_block_;  // content block index → its function_call item
  std::int64_t input_ = 0, cache_read_ = 0, cache_written_ = 0;
};

}  // namespace tokengate::translate
