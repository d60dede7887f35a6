// An Anthropic messages request as an OpenAI chat completions request.
#include <array>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "translate/request.hpp"

namespace tokengate::translate {
namespace {

namespace json = boost::json;
using refusal = std::optional<request_error>;

request_error unsupported_for_chat(std::string_view what) {
  return request_error::client(400, "unsupported_parameter",
                               std::string(what) +
                                   " has no counterpart in OpenAI's chat completions API, which "
                                   "this model's upstream speaks");
}

// Dropped: sampling and service options an OpenAI-compatible engine has no
// member for, or that change nothing of the answer's content.
constexpr std::array<std::string_view, 5> dropped_messages_members{
    "top_k", "thinking", "service_tier", "context_management", "cache_control"};

bool dropped_from_messages(std::string_view key) {
  for (auto d : dropped_messages_members)
    if (d == key) return true;
  return false;
}

std::string_view text_member(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

// An image block's source as the URL of an image_url part.
refusal image_url_part(const json::object& block, std::string_view where, json::array& parts) {
  const auto* source = block.if_contains("source");
  const auto* s = source ? source->if_object() : nullptr;
  auto type = s ? text_member(*s, "type") : std::string_view();
  std::string url;
  if (type == "base64")
    url = "data:" + std::string(text_member(*s, "media_type")) + ";base64," +
          std::string(text_member(*s, "data"));
  else if (type == "url")
    url = text_member(*s, "url");
  else
    return unsupported_for_chat(std::string(where) + " image source '" + std::string(type) + "'");
  parts.push_back(json::object{{"type", "image_url"}, {"image_url", {{"url", url}}}});
  return std::nullopt;
}

// The text of a string or of text blocks (a system prompt, a tool result).
refusal text_of_blocks(const json::value& v, std::string_view where, std::string& text) {
  if (v.is_string()) {
    text = v.get_string();
    return std::nullopt;
  }
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) return unsupported_for_chat(std::string(where) + " of this type");
  for (const auto& b : v.get_array()) {
    const auto* block = b.if_object();
    if (!block || text_member(*block, "type") != "text")
      return unsupported_for_chat(std::string(where) + " holding anything but text");
    if (!text.empty()) text += "\n\n";
    text += text_member(*block, "text");
  }
  return std::nullopt;
}

// A user turn: its tool results become tool messages (first, as they answer
// the assistant's calls), the rest one user message.
refusal user_turn_for_chat(const json::value& content, std::string_view where, json::array& out) {
  if (content.is_string()) {
    out.push_back(json::object{{"role", "user"}, {"content", content}});
    return std::nullopt;
  }
  if (!content.is_array())
    return unsupported_for_chat(std::string(where) + ".content of this type");
  json::array parts;
  for (const auto& b : content.get_array()) {
    const auto* block = b.if_object();
    auto type = block ? text_member(*block, "type") : std::string_view();
    if (type == "text") {
      parts.push_back(json::object{{"type", "text"}, {"text", text_member(*block, "text")}});
    } else if (type == "image") {
      if (auto r = image_url_part(*block, where, parts)) return r;
    } else if (type == "tool_result") {
      std::string text;
      if (auto* c = block->if_contains("content"))
        if (auto r = text_of_blocks(*c, std::string(where) + " tool_result", text)) return r;
      out.push_back(json::object{{"role", "tool"},
                                 {"tool_call_id", text_member(*block, "tool_use_id")},
                                 {"content", text}});
    } else {
      return unsupported_for_chat(std::string(where) + " content block of type '" +
                                  std::string(type) + "'");
    }
  }
  if (!parts.empty()) out.push_back(json::object{{"role", "user"}, {"content", std::move(parts)}});
  return std::nullopt;
}

// An assistant turn: its text as content, its tool_use blocks as tool
// calls; its thinking is not sent back (chat APIs take none).
refusal assistant_turn_for_chat(const json::value& content, std::string_view where,
                                json::array& out) {
  if (content.is_string()) {
    out.push_back(json::object{{"role", "assistant"}, {"content", content}});
    return std::nullopt;
  }
  if (!content.is_array())
    return unsupported_for_chat(std::string(where) + ".content of this type");
  std::string text;
  json::array calls;
  for (const auto& b : content.get_array()) {
    const auto* block = b.if_object();
    auto type = block ? text_member(*block, "type") : std::string_view();
    if (type == "text") {
      text += text_member(*block, "text");
    } else if (type == "tool_use") {
      const auto* input = block->if_contains("input");
      calls.push_back(
          json::object{{"id", text_member(*block, "id")},
                       {"type", "function"},
                       {"function",
                        {{"name", text_member(*block, "name")},
                         {"arguments", input ? json::serialize(*input) : std::string("{}")}}}});
    } else if (type != "thinking" && type != "redacted_thinking") {
      return unsupported_for_chat(std::string(where) + " content block of type '" +
                                  std::string(type) + "'");
    }
  }
  json::object message{
      {"role", "assistant"},
      {"content", text.empty() && !calls.empty() ? json::value() : json::value(text)}};
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  out.push_back(std::move(message));
  return std::nullopt;
}

refusal turns_as_chat(const json::value& v, json::array& out) {
  if (!v.is_array())
    return request_error::client(400, "invalid_request", "messages must be an array");
  std::size_t i = 0;
  for (const auto& item : v.get_array()) {
    auto where = "messages[" + std::to_string(i++) + "]";
    const auto* m = item.if_object();
    auto role = m ? text_member(*m, "role") : std::string_view();
    const auto* content = m ? m->if_contains("content") : nullptr;
    json::value none;
    refusal r;
    if (role == "user")
      r = user_turn_for_chat(content ? *content : none, where, out);
    else if (role == "assistant")
      r = assistant_turn_for_chat(content ? *content : none, where, out);
    else
      return unsupported_for_chat(where + " with role '" + std::string(role) + "'");
    if (r) return r;
  }
  return std::nullopt;
}

refusal tools_as_functions(const json::value& v, json::object& out) {
  if (!v.is_array()) return unsupported_for_chat("tools of this type");
  json::array tools;
  for (const auto& t : v.get_array()) {
    const auto* tool = t.if_object();
    if (!tool) return unsupported_for_chat("a tool of this type");
    // A server tool (web search, code execution, …) runs at Anthropic.
    if (auto type = text_member(*tool, "type"); !type.empty() && type != "custom")
      return unsupported_for_chat("the server tool '" + std::string(type) + "'");
    json::object function{{"name", text_member(*tool, "name")}};
    if (auto* d = tool->if_contains("description")) function["description"] = *d;
    if (auto* s = tool->if_contains("input_schema")) function["parameters"] = *s;
    tools.push_back(json::object{{"type", "function"}, {"function", std::move(function)}});
  }
  out["tools"] = std::move(tools);
  return std::nullopt;
}

refusal tool_choice_for_chat(const json::value& v, json::object& out) {
  const auto* choice = v.if_object();
  auto type = choice ? text_member(*choice, "type") : std::string_view();
  if (type == "auto" || type == "none")
    out["tool_choice"] = type;
  else if (type == "any")
    out["tool_choice"] = "required";
  else if (type == "tool")
    out["tool_choice"] =
        json::object{{"type", "function"}, {"function", {{"name", text_member(*choice, "name")}}}};
  else
    return unsupported_for_chat("tool_choice of type '" + std::string(type) + "'");
  if (auto* p = choice->if_contains("disable_parallel_tool_use");
      p && p->is_bool() && p->get_bool())
    out["parallel_tool_calls"] = false;
  return std::nullopt;
}

refusal member_for_chat(std::string_view key, const json::value& v, json::object& out,
                        json::array& messages, const request_options& options) {
  if (key == "model" || key == "temperature" || key == "top_p") {
    out[key] = v;
  } else if (key == "stream") {
    out["stream"] = v;
    // The usage Anthropic's stream always ends with.
    if (v.is_bool() && v.get_bool()) out["stream_options"] = json::object{{"include_usage", true}};
  } else if (key == "max_tokens") {
    out[chat_limit_key(options.limit_spelling)] = v;
  } else if (key == "system") {
    std::string system;
    if (auto r = text_of_blocks(v, "system", system)) return r;
    if (!system.empty())
      messages.insert(messages.begin(), json::object{{"role", "system"}, {"content", system}});
  } else if (key == "messages") {
    return turns_as_chat(v, messages);
  } else if (key == "stop_sequences") {
    if (v.is_array() && !v.get_array().empty()) out["stop"] = v;
  } else if (key == "tools") {
    return tools_as_functions(v, out);
  } else if (key == "tool_choice") {
    return tool_choice_for_chat(v, out);
  } else if (key == "metadata") {
    if (auto* o = v.if_object())
      if (auto* user = o->if_contains("user_id"); user && user->is_string()) out["user"] = *user;
  } else if (!dropped_from_messages(key)) {
    return unsupported_for_chat("'" + std::string(key) + "'");
  }
  return std::nullopt;
}

}  // namespace

std::variant<translated_request, request_error> chat_request_from_anthropic(
    std::string_view body, const request_options& options) {
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  if (ec || !parsed.is_object())
    return request_error::client(400, "invalid_json", "request body is not a JSON object");
  json::object out;
  json::array messages;
  // (system first, whatever the member order: it is inserted at the front)
  for (const auto& [key, value] : parsed.get_object())
    if (auto r = member_for_chat(key, value, out, messages, options)) return std::move(*r);
  auto spelled = chat_limit_key(options.limit_spelling);
  if (!out.contains(spelled) && options.output_limit) out[spelled] = *options.output_limit;
  out["messages"] = std::move(messages);
  translated_request t;
  t.body = json::serialize(out);
  return t;
}

}  // namespace tokengate::translate
