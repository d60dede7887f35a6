#pragma once
// An OpenAI Responses answer for an Anthropic Messages client, event by
// event: the same events as anthropic_from_chat writes (it is that writer,
// fed another API's events), without passing through chat chunks (a
// translation chained through chat parses every event twice).
// response.created opens the message; output_text deltas stream into a
// text block, reasoning (summary or text) deltas into a thinking block,
// each function_call item into a tool_use block whose input streams from
// its argument deltas; response.completed ends with end_turn (tool_use
// when the model called a tool), response.incomplete with max_tokens
// (refusal for a content filter), both with the usage;
// response.failed and an `error` event are Anthropic's error event.
// Whole answers go through chat (chat_from_responses, then
// anthropic_from_chat): their cost is per answer, not per event.
#include <cstdint>
#include <map>
#include <string>

#include "translate/anthropic_from_chat.hpp"

namespace tokengate::translate {

class anthropic_from_responses final : public anthropic_from_chat {
 public:
  using anthropic_from_chat::anthropic_from_chat;

  dialect upstream_dialect() const override { return dialect::openai_responses; }
  void on_event(const stream::sse_event& event, std::string& out) override;
  void on_end(std::string& out) override;
  void whole(unsigned& status, std::string& body) override;

 private:
  void event(std::string_view type, const boost::json::object& e, std::string& out);
  void open_message(const boost::json::object* response, std::string& out);
  void text(block kind, std::string_view piece, std::string& out);
  void call_added(const boost::json::object& e, std::string& out);
  void call_done(const boost::json::object& e, std::string& out);
  void arguments(std::int64_t output_index, std::string_view fragment, std::string& out);
  void finish(const boost::json::object* response, std::string_view stop_reason, std::string& out);
  void failed(const boost::json::object* error, std::string& out);

  struct call {
    int block;
    bool streamed;  // some of its arguments told
  };
  std::map<std::int64_t, call> calls_;  // output_index → its tool_use block
};

}  // namespace tokengate::translate
