// An OpenAI chat completions request as an Anthropic messages request.
#include <array>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "translate/prompt_cache.hpp"
#include "translate/request.hpp"

namespace tokengate::translate {
namespace {

namespace json = boost::json;
using refusal = std::optional<request_error>;

request_error unsupported(std::string_view what) {
  return request_error::client(400, "unsupported_parameter",
                               std::string(what) +
                                   " has no counterpart in Anthropic's Messages API, which this "
                                   "model's upstream speaks");
}

// Dropped, as Anthropic's own OpenAI compatibility layer ignores them.
constexpr std::array<std::string_view, 14> dropped_members{"logprobs",
                                                           "top_logprobs",
                                                           "presence_penalty",
                                                           "frequency_penalty",
                                                           "seed",
                                                           "service_tier",
                                                           "store",
                                                           "logit_bias",
                                                           "metadata",
                                                           "reasoning_effort",
                                                           "prompt_cache_key",
                                                           "safety_identifier",
                                                           "verbosity",
                                                           "prediction"};

bool dropped(std::string_view key) {
  for (auto d : dropped_members)
    if (d == key) return true;
  return false;
}

std::string_view text_of(const json::value& v) {
  return v.is_string() ? std::string_view(v.get_string()) : std::string_view();
}

// A string member, viewed where it lies ("" when absent or not a string).
std::string_view text_member_of(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v ? text_of(*v) : std::string_view();
}

// An image_url part: a data: URL becomes a base64 source, any other a URL source.
json::object image_block(std::string_view url) {
  constexpr std::string_view base64_tag = ";base64,";
  if (url.starts_with("data:"))
    if (auto tag = url.find(base64_tag); tag != std::string_view::npos)
      return {{"type", "image"},
              {"source",
               {{"type", "base64"},
                {"media_type", url.substr(5, tag - 5)},
                {"data", url.substr(tag + base64_tag.size())}}}};
  return {{"type", "image"}, {"source", {{"type", "url"}, {"url", url}}}};
}

// A message's content (a string or parts) as content blocks.
refusal content_blocks(const json::value& content, std::string_view where, json::array& blocks) {
  if (content.is_null()) return std::nullopt;
  if (content.is_string()) {
    if (!content.get_string().empty())
      blocks.push_back(json::object{{"type", "text"}, {"text", content.get_string()}});
    return std::nullopt;
  }
  if (!content.is_array()) return unsupported(std::string(where) + " of this type");
  for (const auto& p : content.get_array()) {
    const auto* part = p.if_object();
    auto type = part ? text_member_of(*part, "type") : std::string_view();
    if (type == "text" || type == "refusal") {
      auto text = text_member_of(*part, type);
      blocks.push_back(json::object{{"type", "text"}, {"text", text}});
    } else if (type == "image_url" && part->contains("image_url")) {
      const auto& image = part->at("image_url");
      auto url = image.is_object() && image.get_object().contains("url")
                     ? text_of(image.get_object().at("url"))
                     : text_of(image);
      blocks.push_back(image_block(url));
    } else {
      return unsupported(std::string(where) + " part of type '" + std::string(type) + "'");
    }
  }
  return std::nullopt;
}

// Appended to the last message when it has the same role (tool results
// and the user's words after them make one user turn).
void add_turn(json::array& messages, std::string_view role, json::array blocks) {
  if (blocks.empty()) return;
  if (!messages.empty()) {
    auto& last = messages.back().as_object();
    if (last.at("role").as_string() == role) {
      auto& content = last.at("content").as_array();
      for (auto& b : blocks) content.push_back(std::move(b));
      return;
    }
  }
  messages.push_back(json::object{{"role", role}, {"content", std::move(blocks)}});
}

refusal assistant_blocks(const json::object& m, std::string_view where, json::array& blocks) {
  if (auto* content = m.if_contains("content"))
    if (auto r = content_blocks(*content, where, blocks)) return r;
  auto* calls = m.if_contains("tool_calls");
  if (!calls || !calls->is_array()) return std::nullopt;
  for (const auto& c : calls->get_array()) {
    const auto* call = c.if_object();
    const auto* f = call ? call->if_contains("function") : nullptr;
    if (!f || !f->is_object())
      return unsupported(std::string(where) + " tool call without function");
    const auto& fn = f->get_object();
    boost::system::error_code ec;
    auto arguments = fn.contains("arguments") ? text_of(fn.at("arguments")) : "{}";
    auto input = json::parse(arguments.empty() ? "{}" : arguments, ec);
    if (ec || !input.is_object())
      return request_error::client(
          400, "invalid_tool_arguments",
          std::string(where) + ": a tool call's arguments must be a JSON object");
    blocks.push_back(json::object{{"type", "tool_use"},
                                  {"id", call->contains("id") ? call->at("id") : json::value("")},
                                  {"name", fn.contains("name") ? fn.at("name") : json::value("")},
                                  {"input", std::move(input)}});
  }
  return std::nullopt;
}

refusal tool_result(const json::object& m, std::string_view where, json::array& blocks) {
  json::array content;
  if (auto* c = m.if_contains("content"))
    if (auto r = content_blocks(*c, where, content)) return r;
  blocks.push_back(json::object{
      {"type", "tool_result"},
      {"tool_use_id", m.contains("tool_call_id") ? m.at("tool_call_id") : json::value("")},
      {"content", std::move(content)}});
  return std::nullopt;
}

refusal convert_messages(const json::value& v, json::object& out) {
  if (!v.is_array())
    return request_error::client(400, "invalid_request", "messages must be an array");
  json::array messages;
  std::string system;
  std::size_t i = 0;
  for (const auto& item : v.get_array()) {
    auto where = "messages[" + std::to_string(i++) + "]";
    const auto* m = item.if_object();
    auto role = m && m->contains("role") ? text_of(m->at("role")) : std::string_view();
    json::array blocks;
    refusal r;
    if (role == "system" || role == "developer") {
      json::array parts;
      r = content_blocks(m->contains("content") ? m->at("content") : json::value(), where, parts);
      for (const auto& p : parts) {
        if (!system.empty()) system += "\n\n";
        system += text_of(p.as_object().at("text"));
      }
    } else if (role == "user") {
      r = content_blocks(m->contains("content") ? m->at("content") : json::value(), where, blocks);
      add_turn(messages, "user", std::move(blocks));
    } else if (role == "assistant") {
      r = assistant_blocks(*m, where, blocks);
      add_turn(messages, "assistant", std::move(blocks));
    } else if (role == "tool") {
      r = tool_result(*m, where, blocks);
      add_turn(messages, "user", std::move(blocks));
    } else {
      return unsupported(where + " with role '" + std::string(role) + "'");
    }
    if (r) return r;
  }
  if (!system.empty()) out["system"] = system;
  out["messages"] = std::move(messages);
  return std::nullopt;
}

refusal convert_tools(const json::value& v, json::object& out) {
  if (!v.is_array()) return unsupported("tools of this type");
  json::array tools;
  for (const auto& t : v.get_array()) {
    const auto* tool = t.if_object();
    const auto* f = tool ? tool->if_contains("function") : nullptr;
    if (!f || !f->is_object() || text_member_of(*tool, "type") != "function")
      return unsupported("a tool that is not a function");
    const auto& fn = f->get_object();
    json::object converted{{"name", fn.contains("name") ? fn.at("name") : json::value("")}};
    if (auto* d = fn.if_contains("description")) converted["description"] = *d;
    auto* schema = fn.if_contains("parameters");
    converted["input_schema"] =
        schema && schema->is_object()
            ? *schema
            : json::value(json::object{{"type", "object"}, {"properties", json::object()}});
    tools.push_back(std::move(converted));
  }
  out["tools"] = std::move(tools);
  return std::nullopt;
}

refusal convert_tool_choice(const json::value& v, json::object& out) {
  if (v.is_string()) {
    auto s = v.get_string();
    if (s == "auto" || s == "none")
      out["tool_choice"] = json::object{{"type", s}};
    else if (s == "required")
      out["tool_choice"] = json::object{{"type", "any"}};
    else
      return unsupported("tool_choice '" + std::string(s) + "'");
    return std::nullopt;
  }
  const auto* f = v.is_object() ? v.get_object().if_contains("function") : nullptr;
  if (!f || !f->is_object() || !f->get_object().contains("name"))
    return unsupported("this tool_choice");
  out["tool_choice"] = json::object{{"type", "tool"}, {"name", f->get_object().at("name")}};
  return std::nullopt;
}

refusal convert_stop(const json::value& v, json::object& out) {
  json::array sequences;
  if (v.is_string())
    sequences.push_back(v);
  else if (v.is_array())
    sequences = v.get_array();
  else if (!v.is_null())
    return unsupported("stop of this type");
  if (!sequences.empty()) out["stop_sequences"] = std::move(sequences);
  return std::nullopt;
}

// One top-level member of the chat request onto the messages request.
refusal convert_member(std::string_view key, const json::value& v, json::object& out,
                       translated_request& t) {
  if (key == "model" || key == "stream" || key == "top_p")
    out[key] = v;
  else if (key == "messages")
    return convert_messages(v, out);
  else if (key == "tools")
    return convert_tools(v, out);
  else if (key == "tool_choice")
    return convert_tool_choice(v, out);
  else if (key == "stop")
    return convert_stop(v, out);
  else if (key == "max_tokens" || key == "max_completion_tokens") {
    if (!v.is_null()) out["max_tokens"] = v;
  } else if (key == "temperature") {
    // OpenAI's range is 0–2, Anthropic's 0–1: above 1 is taken as 1, as
    // Anthropic's compatibility layer does.
    if (v.is_number()) out["temperature"] = std::min(v.to_number<double>(), 1.0);
  } else if (key == "user") {
    if (v.is_string()) out["metadata"] = json::object{{"user_id", v}};
  } else if (key == "stream_options") {
    if (auto* o = v.if_object())
      if (auto* u = o->if_contains("include_usage"); u && u->is_bool())
        t.usage_asked = u->get_bool();
  } else if (key == "n") {
    if (!(v.is_int64() && v.get_int64() == 1) && !v.is_null()) return unsupported("n other than 1");
  } else if (key == "parallel_tool_calls") {
    if (v.is_bool() && !v.get_bool()) out["disable_parallel_tool_use"] = true;  // (moved below)
  } else if (key == "response_format") {
    auto* o = v.if_object();
    auto* type = o ? o->if_contains("type") : nullptr;
    if (!(type && text_of(*type) == "text")) return unsupported("response_format other than text");
  } else if (key == "modalities") {
    if (!(v.is_array() && v.get_array().size() == 1 && text_of(v.get_array()[0]) == "text"))
      return unsupported("modalities other than text");
  } else if (!dropped(key)) {
    return unsupported("'" + std::string(key) + "'");
  }
  return std::nullopt;
}

}  // namespace

std::variant<translated_request, request_error> anthropic_request_from_chat(
    std::string_view body, const request_options& options) {
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  if (ec || !parsed.is_object())
    return request_error::client(400, "invalid_json", "request body is not a JSON object");
  translated_request t;
  json::object out;
  for (const auto& [key, value] : parsed.get_object())
    if (auto r = convert_member(key, value, out, t)) return std::move(*r);
  if (!out.contains("messages"))
    return request_error::client(400, "invalid_request", "messages is required");
  if (!out.contains("max_tokens"))
    out["max_tokens"] = options.output_limit.value_or(fallback_max_tokens);
  if (out.erase("disable_parallel_tool_use") && out.contains("tools")) {
    if (!out.contains("tool_choice")) out["tool_choice"] = json::object{{"type", "auto"}};
    out["tool_choice"].as_object()["disable_parallel_tool_use"] = true;
  }
  if (options.prompt_cache_min_tokens)
    place_cache_breakpoints(out, *options.prompt_cache_min_tokens);
  t.body = json::serialize(out);
  return t;
}

}  // namespace tokengate::translate
