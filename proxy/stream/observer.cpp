#include "stream/observer.hpp"

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <array>

#include "stream/chat_chunk.hpp"

namespace tokengate::stream {
namespace json = boost::json;
namespace {

// Parsing scratch space, reused by every event on this thread: events are
// observed one at a time, so a typical event costs no heap allocation.
thread_local std::array<unsigned char, 16 * 1024> parse_scratch;
// What the lean reader found in the event at hand, likewise reused: built
// afresh for each event, its eight choices cost as much as the reading.
thread_local chat_chunk chunk_scratch;

std::string_view str(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

const json::object* obj(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_object() ? &v->get_object() : nullptr;
}

std::optional<std::int64_t> integer(const json::object* o, std::string_view key) {
  if (!o) return std::nullopt;
  auto* v = o->if_contains(key);
  if (!v) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  // A double beyond int64 (or NaN) has no integer value: converting it is
  // undefined behaviour, and an upstream's usage may be anything (found by
  // tests/fuzz/sse_fuzz under UBSan).
  if (v->is_double()) {
    double d = v->get_double();
    if (!(d > -9.2e18 && d < 9.2e18)) return std::nullopt;
    return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

// OpenAI's SDK treats any truthy "error" member as an error.
bool truthy(const json::value* v) {
  if (!v || v->is_null()) return false;
  if (v->is_bool()) return v->get_bool();
  if (v->is_string()) return !v->get_string().empty();
  if (v->is_object()) return !v->get_object().empty();
  return true;
}

// Tool calls are keyed by (choice, index) for OpenAI and by content block
// index for Anthropic; one integer key covers both.
std::int64_t tool_key(std::int64_t choice, std::int64_t index) { return choice * 1'000'000 + index; }

}  // namespace

bool stream_facts::ended_properly() const {
  if (terminator.empty() || finish_reason.empty() || error) return false;
  // With n > 1 every choice that produced anything must have finished.
  for (const auto& [choice, text] : text_by_choice)
    if (!finish_by_choice.count(choice) && !finish_by_choice.empty()) return false;
  return true;
}

void stream_observer::on_event(const sse_event& event) {
  on_json(event.type, event.data);
}

void stream_observer::feed_ndjson(std::string_view bytes) {
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      if (ndjson_line_.size() + bytes.size() <= sse_parser::default_max_event_bytes) ndjson_line_.append(bytes);
      return;
    }
    std::string_view line = bytes.substr(0, nl);
    if (!ndjson_line_.empty()) {
      ndjson_line_.append(line);
      line = ndjson_line_;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) on_json("message", line);
    ndjson_line_.clear();
    bytes.remove_prefix(nl + 1);
  }
}

void stream_observer::open_tool_call(std::int64_t key, std::string_view name) {
  if (!record_) return;
  tool_call_slots_[key] = facts_.tool_calls.size();
  facts_.tool_calls.push_back({std::string(name), {}});
}

void stream_observer::append_tool_arguments(std::int64_t key, std::string_view fragment) {
  if (!record_) return;
  auto it = tool_call_slots_.find(key);
  if (it == tool_call_slots_.end()) {
    open_tool_call(key, "");
    it = tool_call_slots_.find(key);
  }
  facts_.tool_calls[it->second].arguments.append(fragment);
}

responses_delta_reader& stream_observer::responses_reader() {
  if (!responses_reader_) responses_reader_ = std::make_unique<responses_delta_reader>();
  return *responses_reader_;
}

void stream_observer::on_json(std::string_view event_type, std::string_view data) {
  auto index = facts_.events++;
  unsigned kinds = 0;
  auto add_text = [&](std::int64_t choice, std::string_view text) {
    if (text.empty()) return;
    kinds |= kind_text;
    if (record_) facts_.text_by_choice[choice].append(text);
  };
  auto add_reasoning = [&](std::string_view text) {
    if (text.empty()) return;
    kinds |= kind_reasoning;
    if (record_) facts_.reasoning_text.append(text);
  };
  auto finish = [&](std::int64_t choice, std::string_view reason) {
    if (reason.empty()) return;
    kinds |= kind_finish;
    facts_.finish_reason.assign(reason);
    facts_.finish_by_choice[choice].assign(reason);
  };
  auto error = [&](const json::value& detail) {
    kinds |= kind_error;
    facts_.error = true;
    if (record_) facts_.error_json = json::serialize(detail);
  };

  chat_chunk& chunk = chunk_scratch;
  // The lean readers answer for what the full parse below would find,
  // without building a document; recording needs the decoded text, and an
  // error event its detail, so those always take the full parse.
  const bool lean = fast_path_ && !record_ && event_type != "error";
  if (data == "[DONE]") {
    kinds |= kind_done;
    facts_.terminator = "data: [DONE]";
  } else if (lean && read_anthropic_delta(data, kinds)) {
    // What the `content_block_delta` branch below finds for text and
    // thinking, without building a document.
    ++fast_path_events_;
  } else if (lean && event_type.starts_with("response.") && event_type.ends_with(".delta") &&
             responses_reader().read(data, kinds)) {
    // What the `response.` branch below finds for the deltas that carry the
    // answer. (OpenAI and the engines that imitate it name every event twice,
    // in its `event:` line and its `type`; the line is only a quick sign.)
    ++fast_path_events_;
  } else if (lean && chunk_reader_.read(data, chunk)) {
    // What the `choices` branch below finds.
    ++fast_path_events_;
    for (std::size_t i = 0; i < chunk.choice_count; ++i) {
      const auto& c = chunk.choices[i];
      if (c.text) kinds |= kind_text;
      if (c.reasoning) kinds |= kind_reasoning;
      if (c.tool_call) kinds |= kind_tool_call;
      finish(c.index, c.finish_reason);
    }
    if (chunk.usage) {
      kinds |= kind_usage;
      facts_.input_tokens = chunk.prompt_tokens;
      facts_.output_tokens = chunk.completion_tokens;
    }
  } else {
    json::monotonic_resource scratch(parse_scratch.data(), parse_scratch.size());
    boost::system::error_code ec;
    json::value parsed = data.empty() ? json::value() : json::parse(data, ec, &scratch);
    if (data.empty() || ec || !parsed.is_object()) {
      kinds |= kind_ignored;
    } else {
      const auto& o = parsed.get_object();
      auto type = str(o, "type");
      if (event_type == "error" || type == "error") {
        auto* detail = o.if_contains("error");
        error(detail ? *detail : parsed);
      } else if (truthy(o.if_contains("error"))) {
        error(o.at("error"));
      } else if (type == "message_start") {  // Anthropic
        if (auto* message = obj(o, "message")) {
          if (auto* usage = obj(*message, "usage")) {
            kinds |= kind_usage;
            // Its output_tokens is a placeholder; the real count comes in message_delta.
            if (auto in = integer(usage, "input_tokens")) facts_.input_tokens = in;
          }
        }
      } else if (type == "content_block_start") {
        if (auto* block = obj(o, "content_block")) {
          auto block_type = str(*block, "type");
          auto key = tool_key(0, integer(&o, "index").value_or(0));
          if (block_type == "tool_use" || block_type == "server_tool_use") {
            kinds |= kind_tool_call;
            open_tool_call(key, str(*block, "name"));
          } else if (block_type == "text") {
            add_text(0, str(*block, "text"));
          } else if (block_type == "thinking") {
            add_reasoning(str(*block, "thinking"));
          }
        }
      } else if (type == "content_block_delta") {
        if (auto* delta = obj(o, "delta")) {
          auto delta_type = str(*delta, "type");
          if (delta_type == "text_delta") add_text(0, str(*delta, "text"));
          else if (delta_type == "thinking_delta") add_reasoning(str(*delta, "thinking"));
          else if (delta_type == "input_json_delta") {
            auto fragment = str(*delta, "partial_json");
            if (!fragment.empty()) {
              kinds |= kind_tool_call;
              append_tool_arguments(tool_key(0, integer(&o, "index").value_or(0)), fragment);
            }
          }
        }
      } else if (type == "message_delta") {
        if (auto* delta = obj(o, "delta")) finish(0, str(*delta, "stop_reason"));
        if (auto* usage = obj(o, "usage")) {
          kinds |= kind_usage;
          // Cumulative: replace, never add.
          if (auto out = integer(usage, "output_tokens")) facts_.output_tokens = out;
          if (auto in = integer(usage, "input_tokens")) facts_.input_tokens = in;
        }
      } else if (type == "message_stop") {
        kinds |= kind_done;
        facts_.terminator = "event: message_stop";
      } else if (type.starts_with("response.")) {  // OpenAI Responses
        if (type == "response.output_text.delta") add_text(0, str(o, "delta"));
        else if (type == "response.reasoning_text.delta" || type == "response.reasoning_summary_text.delta")
          add_reasoning(str(o, "delta"));
        else if (type == "response.function_call_arguments.delta") {
          auto fragment = str(o, "delta");
          if (!fragment.empty()) {
            kinds |= kind_tool_call;
            append_tool_arguments(tool_key(0, integer(&o, "output_index").value_or(0)), fragment);
          }
        } else if (type == "response.output_item.added") {
          if (auto* item = obj(o, "item"); item && str(*item, "type") == "function_call") {
            kinds |= kind_tool_call;
            open_tool_call(tool_key(0, integer(&o, "output_index").value_or(0)), str(*item, "name"));
          }
        } else if (type == "response.completed" || type == "response.incomplete" || type == "response.failed") {
          if (auto* response = obj(o, "response")) {
            if (type == "response.failed") {
              auto* detail = response->if_contains("error");
              error(detail ? *detail : parsed);
            } else {
              finish(0, str(*response, "status"));
            }
            if (auto* usage = obj(*response, "usage")) {
              kinds |= kind_usage;
              facts_.input_tokens = integer(usage, "input_tokens");
              facts_.output_tokens = integer(usage, "output_tokens");
            }
          }
          kinds |= kind_done;
          facts_.terminator = "event: " + std::string(type);
        }
      } else if (auto* choices = o.if_contains("choices"); choices && choices->is_array()) {
        // OpenAI chat / completions and every engine that speaks them.
        for (const auto& c : choices->get_array()) {
          if (!c.is_object()) continue;
          const auto& choice = c.get_object();
          auto n = integer(&choice, "index").value_or(0);
          if (auto* delta = obj(choice, "delta")) {
            add_text(n, str(*delta, "content"));
            add_reasoning(str(*delta, "reasoning_content"));
            add_reasoning(str(*delta, "reasoning"));
            if (auto* calls = delta->if_contains("tool_calls"); calls && calls->is_array()) {
              for (const auto& call : calls->get_array()) {
                if (!call.is_object()) continue;
                auto key = tool_key(n, integer(&call.get_object(), "index").value_or(0));
                auto* function = obj(call.get_object(), "function");
                if (!function) continue;
                if (auto name = str(*function, "name"); !name.empty()) {
                  kinds |= kind_tool_call;
                  open_tool_call(key, name);
                }
                if (auto args = str(*function, "arguments"); !args.empty()) {
                  kinds |= kind_tool_call;
                  append_tool_arguments(key, args);
                }
              }
            }
          }
          add_text(n, str(choice, "text"));  // completions
          finish(n, str(choice, "finish_reason"));
        }
        if (auto* usage = obj(o, "usage")) {
          kinds |= kind_usage;
          facts_.input_tokens = integer(usage, "prompt_tokens");
          facts_.output_tokens = integer(usage, "completion_tokens");
        }
      } else if (auto* done = o.if_contains("done"); done && done->is_bool()) {  // Ollama native
        if (auto* message = obj(o, "message")) {
          add_text(0, str(*message, "content"));
          add_reasoning(str(*message, "thinking"));
          if (auto* calls = message->if_contains("tool_calls"); calls && calls->is_array() && !calls->get_array().empty())
            kinds |= kind_tool_call;
        }
        add_text(0, str(o, "response"));  // /api/generate
        if (done->get_bool()) {
          finish(0, str(o, "done_reason").empty() ? "stop" : str(o, "done_reason"));
          if (o.contains("eval_count") || o.contains("prompt_eval_count")) {
            kinds |= kind_usage;
            facts_.input_tokens = integer(&o, "prompt_eval_count");
            facts_.output_tokens = integer(&o, "eval_count");
          }
          kinds |= kind_done;
          facts_.terminator = "\"done\": true";
        }
      } else if (auto* stop = o.if_contains("stop"); stop && stop->is_bool()) {  // llama.cpp native
        add_text(0, str(o, "content"));
        if (stop->get_bool()) {
          finish(0, str(o, "stop_type").empty() ? "stop" : str(o, "stop_type"));
          if (o.contains("tokens_predicted")) {
            kinds |= kind_usage;
            facts_.input_tokens = integer(&o, "tokens_evaluated");
            facts_.output_tokens = integer(&o, "tokens_predicted");
          }
          kinds |= kind_done;
          facts_.terminator = "\"stop\": true";
        }
      }
    }
  }

  if (kinds & kind_usage) ++facts_.usage_events;
  if (kinds & content_kinds) {
    ++facts_.content_events;
    if (!facts_.first_content_event) facts_.first_content_event = index;
  }
  if (kinds & kind_text) {
    ++facts_.text_events;
    if (!facts_.first_text_event) facts_.first_text_event = index;
  }
  if (kinds & kind_reasoning) ++facts_.reasoning_events;
  if (kinds & kind_tool_call) ++facts_.tool_call_events;
  last_kinds_ = kinds;
  if (record_) facts_.kinds.push_back(kinds);
}

}  // namespace tokengate::stream
