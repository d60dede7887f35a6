#pragma once
// An OpenAI chat answer for a Responses client: the first chunk opens the
// response (response.created, response.in_progress); content deltas
// stream into a message item (output_item.added, content_part.added, then
// output_text.delta), reasoning deltas (reasoning_content, or vLLM's and
// Ollama's reasoning) into a reasoning item's summary, and each tool call
// into a function_call item whose arguments stream as
// function_call_arguments.delta. The finish_reason closes every item
// (their .done events carry the whole text), and `[DONE]`, after the
// usage chunk, ends the response: response.completed, or
// response.incomplete for a stop at the output limit. Every event is
// numbered (sequence_number, from 0), and the terminal event carries the
// whole response: the SDKs take their final answer from it.
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "stream/answer_translator.hpp"

namespace tokengate::translate {

class responses_from_chat : public stream::answer_translator {
 public:
  // `model`: the name the client asked for (until the upstream names one).
  // `created_at` and `hex`: the response's Unix time and the hex of its
  // ids (now, and random; tests fix them, to compare two translations).
  explicit responses_from_chat(std::string model, std::optional<std::int64_t> created_at = {},
                               std::string hex = {});

  dialect upstream_dialect() const override { return dialect::openai_chat; }
  void on_event(const stream::sse_event& event, std::string& out) override;
  void on_end(std::string& out) override;
  void on_cut(long long limit, std::string& out) override;
  void on_failure(const request_error& why, std::string& out) override;
  void whole(unsigned& status, std::string& body) override;

 protected:
  // (what responses_from_anthropic, which writes the same events from
  // another API's, uses)
  enum class item_kind { message, reasoning, function_call };
  struct item {
    item_kind kind;
    std::string id;
    std::string text;  // the message's text, the reasoning, or the call's arguments
    std::string call_id, name;
    std::string status = "in_progress";  // then completed or incomplete
  };

  void chunk(const boost::json::object& c, std::string& out);
  void start(const boost::json::object* c, std::string& out);
  void delta(const boost::json::object& d, std::string& out);
  void tool_call(const boost::json::object& call, std::string& out);
  void read_usage(const boost::json::object* usage);
  void whole_message(const boost::json::object& m, std::string& ignored);

  // The message or reasoning item the next delta of its kind goes to.
  int running(item_kind kind, std::string& out);
  int open_item(item_kind kind, std::string& out, std::string call_id = {}, std::string name = {});
  void close_item(int index, std::string& out);
  void close_all(std::string& out);
  void piece(int index, std::string_view text, std::string& out);

  // The terminal event (response.completed, .incomplete or .failed).
  void end(std::string& out);
  void fail(std::string_view code, std::string_view message, std::string& out);

  void open_event(std::string_view type, std::string& out);
  void emit(std::string_view type, const boost::json::object& fields, std::string& out);
  boost::json::object item_json(const item& it) const;
  boost::json::object response_json(std::string_view status) const;
  boost::json::value usage_json() const;
  std::string next_id(std::string_view prefix);
  std::string_view closing_status() const;

  std::string model_;
  std::int64_t created_at_;
  std::string hex_;
  std::int64_t sequence_ = 0;
  bool started_ = false, ended_ = false;
  std::vector<item> items_;
  int running_ = -1;                       // the message or reasoning item open, if any
  std::map<std::int64_t, int> tool_item_;  // chat tool call index → its item
  std::string finish_reason_;
  bool cut_ = false;
  boost::json::value error_;  // a failed response's error
  std::int64_t prompt_ = 0, cached_ = 0, completion_ = 0, reasoning_tokens_ = 0;
  bool usage_seen_ = false;
};

}  // namespace tokengate::translate
