#include "stream/observation.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace tokengate::stream {

bool stream_facts::ended_properly() const {
  if (terminator.empty() || finish_reason.empty() || error) return false;
  // With n > 1 every choice that produced anything must have finished.
  for (const auto& [choice, text] : text_by_choice)
    if (!finish_by_choice.count(choice) && !finish_by_choice.empty()) return false;
  return true;
}

void observation::text(std::int64_t choice, std::string_view text) {
  if (text.empty()) return;
  kinds_ |= kind_text;
  if (record_) facts_.text_by_choice[choice].append(text);
}

void observation::reasoning(std::string_view text) {
  if (text.empty()) return;
  kinds_ |= kind_reasoning;
  if (record_) facts_.reasoning_text.append(text);
}

void observation::open_tool_call(std::int64_t key, std::string_view name) {
  kinds_ |= kind_tool_call;
  if (!record_) return;
  tool_call_slots_[key] = facts_.tool_calls.size();
  facts_.tool_calls.push_back({std::string(name), {}});
}

void observation::tool_arguments(std::int64_t key, std::string_view fragment) {
  if (fragment.empty()) return;
  kinds_ |= kind_tool_call;
  if (!record_) return;
  auto it = tool_call_slots_.find(key);
  if (it == tool_call_slots_.end()) {
    open_tool_call(key, "");
    it = tool_call_slots_.find(key);
  }
  facts_.tool_calls[it->second].arguments.append(fragment);
}

void observation::usage(std::optional<std::int64_t> input, std::optional<std::int64_t> output) {
  kinds_ |= kind_usage;
  facts_.input_tokens = input;
  facts_.output_tokens = output;
}

void observation::input_tokens(std::int64_t n) { facts_.input_tokens = n; }
void observation::output_tokens(std::int64_t n) { facts_.output_tokens = n; }

void observation::error(const boost::json::value& detail) {
  kinds_ |= kind_error;
  facts_.error = true;
  if (record_) facts_.error_json = boost::json::serialize(detail);
}

void observation::done(std::string_view terminator) {
  kinds_ |= kind_done;
  facts_.terminator.assign(terminator);
}

}  // namespace tokengate::stream
