// An OpenAI chat completions request as an OpenAI Responses request, for
// the upstreams that serve the Responses API alone (some of OpenAI's
// newest models). Stateless: every request carries its whole conversation
// as `input` and asks that nothing be stored (`store: false`).
#include <array>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "translate/request.hpp"

namespace tokengate::translate {
namespace {

namespace json = boost::json;
using refusal = std::optional<request_error>;

request_error no_responses_counterpart(std::string_view what) {
  return request_error::client(400, "unsupported_parameter",
                               std::string(what) +
                                   " has no counterpart in OpenAI's Responses API, which this "
                                   "model's upstream speaks");
}

// Passed as they are: the Responses API takes them under the same name
// and meaning.
constexpr std::array<std::string_view, 9> same_members{
    "model",        "temperature",      "top_p",    "parallel_tool_calls", "user",
    "service_tier", "prompt_cache_key", "metadata", "safety_identifier"};

// Dropped: what asks nothing of the answer there (nothing is stored; the
// usage comes with every Responses stream).
constexpr std::array<std::string_view, 3> dropped_chat_members{"store", "stream_options", "n"};

template <std::size_t N>
bool listed(const std::array<std::string_view, N>& list, std::string_view key) {
  for (auto k : list)
    if (k == key) return true;
  return false;
}

std::string_view string_at(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

// One chat content part as a Responses one: text is input_text in what
// the user or the system says, output_text in what the model said.
refusal responses_part_of(const json::object& part, bool from_model, const std::string& where,
                          json::array& parts) {
  auto type = string_at(part, "type");
  if (type == "text" || type == "refusal") {
    parts.push_back(json::object{{"type", from_model ? "output_text" : "input_text"},
                                 {"text", string_at(part, type)}});
    return std::nullopt;
  }
  if (type == "image_url" && !from_model) {
    const auto* image = part.if_contains("image_url");
    json::object out{{"type", "input_image"}};
    if (image && image->is_string()) {
      out["image_url"] = *image;
    } else if (const auto* o = image ? image->if_object() : nullptr) {
      out["image_url"] = string_at(*o, "url");
      if (auto detail = string_at(*o, "detail"); !detail.empty()) out["detail"] = detail;
    }
    out.emplace("detail", "auto");  // (required by the Responses API)
    parts.push_back(std::move(out));
    return std::nullopt;
  }
  return no_responses_counterpart(where + " part of type '" + std::string(type) + "'");
}

// A message's content as Responses content: a string stays one.
refusal responses_content_of(const json::value& content, bool from_model, const std::string& where,
                             json::value& out) {
  if (content.is_string() || content.is_null()) {
    out = content.is_null() ? json::value("") : content;
    return std::nullopt;
  }
  if (!content.is_array()) return no_responses_counterpart(where + ".content of this type");
  json::array parts;
  for (const auto& p : content.get_array()) {
    const auto* part = p.if_object();
    if (!part) return no_responses_counterpart(where + ".content holding a non-object");
    if (auto r = responses_part_of(*part, from_model, where, parts)) return r;
  }
  out = std::move(parts);
  return std::nullopt;
}

// The text of a tool message (a string, or text parts).
refusal tool_output_of(const json::object& m, const std::string& where, std::string& text) {
  const auto* content = m.if_contains("content");
  if (!content || content->is_null()) return std::nullopt;
  if (content->is_string()) {
    text = content->get_string();
    return std::nullopt;
  }
  if (!content->is_array()) return no_responses_counterpart(where + ".content of this type");
  for (const auto& p : content->get_array()) {
    const auto* part = p.if_object();
    if (!part || string_at(*part, "type") != "text")
      return no_responses_counterpart(where + ".content holding anything but text");
    text += string_at(*part, "text");
  }
  return std::nullopt;
}

// An assistant turn: its text as a message item, each tool call as a
// function_call item after it (its reasoning, if sent back, is dropped:
// a Responses upstream takes back only the reasoning items it made).
refusal assistant_items(const json::object& m, const std::string& where, json::array& input) {
  if (const auto* content = m.if_contains("content"); content && !content->is_null()) {
    json::value c;
    if (auto r = responses_content_of(*content, true, where, c)) return r;
    if (!(c.is_string() && c.get_string().empty()))
      input.push_back(json::object{{"role", "assistant"}, {"content", std::move(c)}});
  }
  const auto* calls = m.if_contains("tool_calls");
  if (!calls || calls->is_null()) return std::nullopt;
  if (!calls->is_array()) return no_responses_counterpart(where + ".tool_calls of this type");
  for (const auto& c : calls->get_array()) {
    const auto* call = c.if_object();
    const auto* f = call ? call->if_contains("function") : nullptr;
    if (!f || !f->is_object())
      return no_responses_counterpart(where + " tool call without function");
    input.push_back(json::object{{"type", "function_call"},
                                 {"call_id", string_at(*call, "id")},
                                 {"name", string_at(f->get_object(), "name")},
                                 {"arguments", string_at(f->get_object(), "arguments")}});
  }
  return std::nullopt;
}

refusal message_as_items(const json::value& v, const std::string& where, json::array& input) {
  const auto* m = v.if_object();
  if (!m) return no_responses_counterpart(where + " that is not an object");
  auto role = string_at(*m, "role");
  if (role == "assistant") return assistant_items(*m, where, input);
  if (role == "tool") {
    std::string output;
    if (auto r = tool_output_of(*m, where, output)) return r;
    input.push_back(json::object{{"type", "function_call_output"},
                                 {"call_id", string_at(*m, "tool_call_id")},
                                 {"output", output}});
    return std::nullopt;
  }
  if (role != "user" && role != "system" && role != "developer")
    return no_responses_counterpart(where + " with role '" + std::string(role) + "'");
  json::value content = "";
  if (const auto* c = m->if_contains("content"))
    if (auto r = responses_content_of(*c, false, where, content)) return r;
  input.push_back(json::object{{"role", role}, {"content", std::move(content)}});
  return std::nullopt;
}

refusal messages_as_input(const json::value& v, json::object& out) {
  if (!v.is_array())
    return request_error::client(400, "invalid_request", "messages must be an array");
  json::array input;
  std::size_t i = 0;
  for (const auto& m : v.get_array())
    if (auto r = message_as_items(m, "messages[" + std::to_string(i++) + "]", input)) return r;
  out["input"] = std::move(input);
  return std::nullopt;
}

// Chat's nested function tool as the Responses API's flat one.
refusal tools_as_responses(const json::value& v, json::object& out) {
  if (!v.is_array()) return no_responses_counterpart("tools of this type");
  json::array tools;
  for (const auto& t : v.get_array()) {
    const auto* tool = t.if_object();
    const auto* f = tool ? tool->if_contains("function") : nullptr;
    if (!f || !f->is_object() || string_at(*tool, "type") != "function")
      return no_responses_counterpart("a tool that is not a function");
    const auto& fn = f->get_object();
    json::object flat{{"type", "function"}, {"name", string_at(fn, "name")}};
    for (const char* key : {"description", "parameters", "strict"})
      if (auto* m = fn.if_contains(key); m && !m->is_null()) flat[key] = *m;
    // (strict defaults to true there, to false in chat: say chat's default)
    if (!flat.contains("strict")) flat["strict"] = false;
    tools.push_back(std::move(flat));
  }
  out["tools"] = std::move(tools);
  return std::nullopt;
}

refusal tool_choice_as_responses(const json::value& v, json::object& out) {
  if (v.is_string()) {
    auto s = v.get_string();
    if (s != "auto" && s != "none" && s != "required")
      return no_responses_counterpart("tool_choice '" + std::string(s) + "'");
    out["tool_choice"] = v;
    return std::nullopt;
  }
  const auto* choice = v.if_object();
  const auto* f = choice ? choice->if_contains("function") : nullptr;
  if (!f || !f->is_object() || string_at(*choice, "type") != "function")
    return no_responses_counterpart("this tool_choice");
  out["tool_choice"] =
      json::object{{"type", "function"}, {"name", string_at(f->get_object(), "name")}};
  return std::nullopt;
}

// response_format as text.format: a JSON schema's members move up a level.
refusal format_as_text(const json::value& v, json::object& out) {
  const auto* format = v.if_object();
  auto type = format ? string_at(*format, "type") : std::string_view();
  if (type == "text" || type == "json_object") {
    out["text"] = json::object{{"format", {{"type", type}}}};
    return std::nullopt;
  }
  if (type != "json_schema") return no_responses_counterpart("this response_format");
  json::object flat{{"type", "json_schema"}};
  if (const auto* schema = format->if_contains("json_schema"); schema && schema->is_object())
    for (const char* k : {"name", "schema", "strict", "description"})
      if (auto* m = schema->get_object().if_contains(k)) flat[k] = *m;
  out["text"] = json::object{{"format", std::move(flat)}};
  return std::nullopt;
}

// Chat members that change the answer and have no Responses member: a
// value that asks nothing (null, false, an empty list) is let through.
bool asks_nothing(const json::value& v) {
  return v.is_null() || (v.is_bool() && !v.get_bool()) || (v.is_array() && v.get_array().empty()) ||
         (v.is_object() && v.get_object().empty());
}

refusal member_for_responses(std::string_view key, const json::value& v, json::object& out,
                             translated_request& t) {
  if (listed(same_members, key)) {
    if (!v.is_null()) out[key] = v;
  } else if (key == "stream") {
    out["stream"] = v;
  } else if (key == "messages") {
    return messages_as_input(v, out);
  } else if (key == "max_tokens" || key == "max_completion_tokens") {
    if (!v.is_null()) out["max_output_tokens"] = v;
  } else if (key == "tools") {
    return tools_as_responses(v, out);
  } else if (key == "tool_choice") {
    return tool_choice_as_responses(v, out);
  } else if (key == "response_format") {
    return format_as_text(v, out);
  } else if (key == "reasoning_effort") {
    if (v.is_string()) out["reasoning"] = json::object{{"effort", v}};
  } else if (key == "n") {
    if (!(v.is_null() || (v.is_int64() && v.get_int64() == 1)))
      return no_responses_counterpart("n other than 1");
  } else if (listed(dropped_chat_members, key)) {
    if (key == "stream_options")
      if (auto* o = v.if_object())
        if (auto* u = o->if_contains("include_usage"); u && u->is_bool())
          t.usage_asked = u->get_bool();
  } else if (!asks_nothing(v)) {
    // stop, seed, logprobs, logit_bias, the penalties, audio, prediction,
    // functions, web_search_options, …
    return no_responses_counterpart("'" + std::string(key) + "'");
  }
  return std::nullopt;
}

}  // namespace

std::variant<translated_request, request_error> responses_request_from_chat(
    std::string_view body, const request_options& options) {
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  if (ec || !parsed.is_object())
    return request_error::client(400, "invalid_json", "request body is not a JSON object");
  translated_request t;
  json::object out;
  for (const auto& [key, value] : parsed.get_object())
    if (auto r = member_for_responses(key, value, out, t)) return std::move(*r);
  if (!out.contains("input"))
    return request_error::client(400, "invalid_request", "messages is required");
  if (!out.contains("max_output_tokens") && options.output_limit)
    out["max_output_tokens"] = *options.output_limit;
  out["store"] = false;
  t.body = json::serialize(out);
  return t;
}

}  // namespace tokengate::translate
