// An OpenAI Responses request as an OpenAI chat completions request, for
// the engines that serve chat completions alone (llama.cpp's server,
// Ollama, TGI, older vLLM). Stateless: the conversation is the request's
// own `input`.
#include <array>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "translate/request.hpp"

namespace tokengate::translate {
namespace {

namespace json = boost::json;
using refusal = std::optional<request_error>;

request_error no_chat_counterpart(std::string_view what) {
  return request_error::client(400, "unsupported_parameter",
                               std::string(what) +
                                   " has no counterpart in OpenAI's chat completions API, which "
                                   "this model's upstream speaks");
}

// What needs a response stored at OpenAI: nothing here keeps one.
request_error needs_stored_state(std::string_view what) {
  return request_error::client(400, "unsupported_parameter",
                               std::string(what) +
                                   " needs a response stored by the server; this model's upstream "
                                   "speaks chat completions and nothing is stored: send the "
                                   "whole conversation as input");
}

// Dropped: what changes nothing of the answer an engine gives (nothing is
// stored, so `store` and `metadata` have nothing to act on; `include`
// asks for output only OpenAI's own reasoning models produce).
constexpr std::array<std::string_view, 8> dropped_responses_members{
    "store",   "metadata",       "service_tier",          "prompt_cache_key", "safety_identifier",
    "include", "stream_options", "prompt_cache_retention"};

bool dropped_from_responses(std::string_view key) {
  for (auto d : dropped_responses_members)
    if (d == key) return true;
  return false;
}

std::string_view string_in(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

// One content part of a message as a chat part.
refusal chat_part_of(const json::object& part, const std::string& where, json::array& parts) {
  auto type = string_in(part, "type");
  if (type == "input_text" || type == "output_text" || type == "text") {
    parts.push_back(json::object{{"type", "text"}, {"text", string_in(part, "text")}});
  } else if (type == "refusal") {
    parts.push_back(json::object{{"type", "text"}, {"text", string_in(part, "refusal")}});
  } else if (type == "input_image") {
    auto url = string_in(part, "image_url");
    if (url.empty()) return no_chat_counterpart(where + " input_image without image_url");
    json::object image{{"url", url}};
    if (auto detail = string_in(part, "detail"); !detail.empty()) image["detail"] = detail;
    parts.push_back(json::object{{"type", "image_url"}, {"image_url", std::move(image)}});
  } else {
    return no_chat_counterpart(where + " content part of type '" + std::string(type) + "'");
  }
  return std::nullopt;
}

// A message's content (a string or parts) as chat content: a string when
// it is text alone (what every engine takes), else the parts.
refusal chat_content_of(const json::value& content, const std::string& where, json::value& out) {
  if (content.is_string()) {
    out = content;
    return std::nullopt;
  }
  if (!content.is_array()) return no_chat_counterpart(where + ".content of this type");
  json::array parts;
  for (const auto& p : content.get_array()) {
    if (!p.is_object()) return no_chat_counterpart(where + ".content holding a non-object");
    if (auto r = chat_part_of(p.get_object(), where, parts)) return r;
  }
  std::string text;
  for (const auto& p : parts) {
    if (p.at("type") != "text") {
      out = std::move(parts);
      return std::nullopt;
    }
    text += p.at("text").as_string();
  }
  out = json::string(text);
  return std::nullopt;
}

refusal message_item_for_chat(const json::object& item, const std::string& where,
                              json::array& messages) {
  auto role = string_in(item, "role");
  if (role != "user" && role != "assistant" && role != "system" && role != "developer")
    return no_chat_counterpart(where + " with role '" + std::string(role) + "'");
  json::value content;
  if (auto* c = item.if_contains("content"))
    if (auto r = chat_content_of(*c, where, content)) return r;
  // (developer is OpenAI's new name for system; engines know system)
  messages.push_back(json::object{{"role", role == "developer" ? "system" : role},
                                  {"content", std::move(content)}});
  return std::nullopt;
}

// A call the model made, sent back: a tool call of the assistant message
// before it (the text and calls of one turn are one chat message).
void function_call_for_chat(const json::object& item, json::array& messages) {
  json::object call{
      {"id", string_in(item, "call_id")},
      {"type", "function"},
      {"function",
       {{"name", string_in(item, "name")}, {"arguments", string_in(item, "arguments")}}}};
  if (!messages.empty()) {
    auto& last = messages.back().as_object();
    if (last.at("role") == "assistant") {
      if (!last.contains("tool_calls")) last["tool_calls"] = json::array();
      last["tool_calls"].as_array().push_back(std::move(call));
      return;
    }
  }
  messages.push_back(json::object{
      {"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array{std::move(call)}}});
}

refusal function_output_for_chat(const json::object& item, const std::string& where,
                                 json::array& messages) {
  json::value content = "";
  if (auto* output = item.if_contains("output"))
    if (auto r = chat_content_of(*output, where + ".output", content)) return r;
  if (!content.is_string()) return no_chat_counterpart(where + ".output holding anything but text");
  messages.push_back(json::object{
      {"role", "tool"}, {"tool_call_id", string_in(item, "call_id")}, {"content", content}});
  return std::nullopt;
}

// One input item: a message (typed, or the short form with a role alone),
// a function call and its output; reasoning sent back is dropped (a chat
// engine takes none).
refusal input_item_for_chat(const json::value& v, const std::string& where, json::array& messages) {
  if (!v.is_object()) return no_chat_counterpart(where + " that is not an object");
  const auto& item = v.get_object();
  auto type = string_in(item, "type");
  if (type == "message" || (type.empty() && item.contains("role")))
    return message_item_for_chat(item, where, messages);
  if (type == "function_call") {
    function_call_for_chat(item, messages);
    return std::nullopt;
  }
  if (type == "function_call_output") return function_output_for_chat(item, where, messages);
  if (type == "reasoning") return std::nullopt;
  if (type == "item_reference") return needs_stored_state(where + " (an item_reference)");
  return no_chat_counterpart(where + " of type '" + std::string(type) + "'");
}

refusal input_for_chat(const json::value& input, json::array& messages) {
  if (input.is_string()) {
    messages.push_back(json::object{{"role", "user"}, {"content", input}});
    return std::nullopt;
  }
  if (!input.is_array())
    return request_error::client(400, "invalid_request", "input must be a string or an array");
  std::size_t i = 0;
  for (const auto& item : input.get_array())
    if (auto r = input_item_for_chat(item, "input[" + std::to_string(i++) + "]", messages))
      return r;
  return std::nullopt;
}

// Responses' flat function tool ({type, name, parameters}) as chat's nested one.
refusal tools_for_chat(const json::value& v, json::object& out) {
  if (!v.is_array()) return no_chat_counterpart("tools of this type");
  json::array tools;
  for (const auto& t : v.get_array()) {
    const auto* tool = t.if_object();
    auto type = tool ? string_in(*tool, "type") : std::string_view();
    // web_search, file_search, code_interpreter, computer_use, mcp,
    // image_generation, …: tools that run at OpenAI.
    if (type != "function") return no_chat_counterpart("the tool type '" + std::string(type) + "'");
    json::object function{{"name", string_in(*tool, "name")}};
    for (const char* key : {"description", "parameters", "strict"})
      if (auto* m = tool->if_contains(key); m && !m->is_null()) function[key] = *m;
    tools.push_back(json::object{{"type", "function"}, {"function", std::move(function)}});
  }
  out["tools"] = std::move(tools);
  return std::nullopt;
}

refusal tool_choice_for_chat_completions(const json::value& v, json::object& out) {
  if (v.is_string()) {
    auto s = v.get_string();
    if (s != "auto" && s != "none" && s != "required")
      return no_chat_counterpart("tool_choice '" + std::string(s) + "'");
    out["tool_choice"] = v;
    return std::nullopt;
  }
  const auto* choice = v.if_object();
  auto type = choice ? string_in(*choice, "type") : std::string_view();
  if (type != "function")
    return no_chat_counterpart("tool_choice of type '" + std::string(type) + "'");
  out["tool_choice"] =
      json::object{{"type", "function"}, {"function", {{"name", string_in(*choice, "name")}}}};
  return std::nullopt;
}

// text.format: plain text (nothing to say), a JSON object or a JSON schema.
refusal text_for_chat(const json::value& v, json::object& out) {
  const auto* text = v.if_object();
  if (!text) return no_chat_counterpart("text of this type");
  for (const auto& [key, value] : *text) {
    if (key == "verbosity") continue;  // (a hint OpenAI's own models alone take)
    if (key != "format") return no_chat_counterpart("text." + std::string(key));
    const auto* format = value.if_object();
    auto type = format ? string_in(*format, "type") : std::string_view();
    if (type == "json_object") {
      out["response_format"] = json::object{{"type", "json_object"}};
    } else if (type == "json_schema") {
      json::object schema;
      for (const char* k : {"name", "schema", "strict", "description"})
        if (auto* m = format->if_contains(k)) schema[k] = *m;
      out["response_format"] =
          json::object{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
    } else if (type != "text") {
      return no_chat_counterpart("text.format of type '" + std::string(type) + "'");
    }
  }
  return std::nullopt;
}

refusal reasoning_for_chat(const json::value& v, json::object& out) {
  const auto* reasoning = v.if_object();
  if (!reasoning) return v.is_null() ? std::nullopt : refusal(no_chat_counterpart("reasoning"));
  // (summary: the reasoning an engine streams is passed on as the summary)
  if (auto* effort = reasoning->if_contains("effort"); effort && effort->is_string())
    out["reasoning_effort"] = *effort;
  return std::nullopt;
}

// What is refused outright: a member that only OpenAI's stored state or
// scheduler can honour.
refusal stateful_member(std::string_view key, const json::value& v) {
  if (key == "previous_response_id" || key == "conversation" || key == "prompt") {
    if (!v.is_null()) return needs_stored_state("'" + std::string(key) + "'");
  } else if (key == "background") {
    if (v.is_bool() && v.get_bool()) return needs_stored_state("'background: true'");
  } else if (key == "truncation") {
    if (v.is_string() && v.get_string() == "auto") return no_chat_counterpart("'truncation: auto'");
  }
  return std::nullopt;
}

refusal member_for_chat_completions(std::string_view key, const json::value& v, json::object& out,
                                    json::array& messages, const request_options& options) {
  if (key == "model" || key == "temperature" || key == "top_p" || key == "parallel_tool_calls" ||
      key == "user") {
    if (!v.is_null()) out[key] = v;
  } else if (key == "stream") {
    out["stream"] = v;
    // The usage response.completed carries.
    if (v.is_bool() && v.get_bool()) out["stream_options"] = json::object{{"include_usage", true}};
  } else if (key == "max_output_tokens") {
    if (!v.is_null()) out[chat_limit_key(options.limit_spelling)] = v;
  } else if (key == "instructions") {
    if (v.is_string() && !v.get_string().empty())
      messages.insert(messages.begin(), json::object{{"role", "system"}, {"content", v}});
  } else if (key == "input") {
    return input_for_chat(v, messages);
  } else if (key == "tools") {
    return tools_for_chat(v, out);
  } else if (key == "tool_choice") {
    return tool_choice_for_chat_completions(v, out);
  } else if (key == "text") {
    return text_for_chat(v, out);
  } else if (key == "reasoning") {
    return reasoning_for_chat(v, out);
  } else if (key == "previous_response_id" || key == "conversation" || key == "prompt" ||
             key == "background" || key == "truncation") {
    return stateful_member(key, v);
  } else if (!dropped_from_responses(key)) {
    return no_chat_counterpart("'" + std::string(key) + "'");
  }
  return std::nullopt;
}

}  // namespace

std::variant<translated_request, request_error> chat_request_from_responses(
    std::string_view body, const request_options& options) {
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  if (ec || !parsed.is_object())
    return request_error::client(400, "invalid_json", "request body is not a JSON object");
  const auto& request = parsed.get_object();
  json::object out;
  json::array input;
  for (const auto& [key, value] : request)
    if (key != "instructions")
      if (auto r = member_for_chat_completions(key, value, out, input, options))
        return std::move(*r);
  if (!request.contains("input"))
    return request_error::client(400, "invalid_request", "input is required");
  json::array messages;
  // (the instructions first, whatever the member order)
  if (auto* instructions = request.if_contains("instructions"))
    if (auto r = member_for_chat_completions("instructions", *instructions, out, messages, options))
      return std::move(*r);
  for (auto& m : input) messages.push_back(std::move(m));
  auto spelled = chat_limit_key(options.limit_spelling);
  if (!out.contains(spelled) && options.output_limit) out[spelled] = *options.output_limit;
  out["messages"] = std::move(messages);
  translated_request t;
  t.body = json::serialize(out);
  return t;
}

}  // namespace tokengate::translate
