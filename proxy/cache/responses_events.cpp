#include "cache/responses_events.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace tokengate::cache {
namespace {

namespace json = boost::json;

// The Responses API names each event twice (its `event:` line and its
// `type`) and numbers them from 0.
class numbered_events {
 public:
  void add(std::string_view type, json::object fields) {
    json::object data{{"type", type}, {"sequence_number", next_++}};
    for (auto& [k, v] : fields) data[k] = std::move(v);
    add_event(out, type, data);
  }
  std::string out;

 private:
  std::int64_t next_ = 0;
};

void message_part(numbered_events& e, const json::value& item_id, std::int64_t output,
                  std::int64_t index, const json::object& part) {
  const bool refusal = text_at(part, "type") == "refusal";
  auto key = refusal ? "refusal" : "text";
  auto text = text_at(part, key);
  json::object empty = part;
  empty[key] = "";
  auto where = [&] {
    return json::object{{"item_id", item_id}, {"output_index", output}, {"content_index", index}};
  };
  auto with = [&](std::string_view k, json::value v) {
    auto o = where();
    o[k] = std::move(v);
    return o;
  };
  e.add("response.content_part.added", with("part", std::move(empty)));
  const std::string_view prefix = refusal ? "response.refusal" : "response.output_text";
  for (auto piece : pieces_of(text))
    e.add(std::string(prefix) + ".delta", with("delta", json::string(piece)));
  e.add(std::string(prefix) + ".done", with(key, json::string(text)));
  e.add("response.content_part.done", with("part", part));
}

void output_item(numbered_events& e, std::int64_t output, const json::object& item) {
  auto type = text_at(item, "type");
  const json::value id = item.contains("id") ? item.at("id") : json::value("");
  json::object opening = item;
  if (opening.contains("status")) opening["status"] = "in_progress";
  if (type == "message") opening["content"] = json::array{};
  if (type == "function_call") opening["arguments"] = "";
  e.add("response.output_item.added", {{"output_index", output}, {"item", std::move(opening)}});
  if (auto* content = item.if_contains("content");
      type == "message" && content && content->is_array()) {
    std::int64_t index = 0;
    for (const auto& part : content->get_array())
      if (part.is_object()) message_part(e, id, output, index++, part.get_object());
  }
  if (type == "function_call") {
    auto arguments = text_at(item, "arguments");
    e.add("response.function_call_arguments.delta",
          {{"item_id", id}, {"output_index", output}, {"delta", arguments}});
    e.add("response.function_call_arguments.done",
          {{"item_id", id}, {"output_index", output}, {"arguments", arguments}});
  }
  e.add("response.output_item.done", {{"output_index", output}, {"item", item}});
}

}  // namespace

std::vector<std::string_view> pieces_of(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t from = 0;
  for (auto at = text.find(' ', 1); at != std::string_view::npos; at = text.find(' ', at + 1)) {
    if (at == from) continue;
    out.push_back(text.substr(from, at - from));
    from = at;
  }
  if (from < text.size()) out.push_back(text.substr(from));
  return out;
}

std::string_view text_at(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

void add_event(std::string& out, std::string_view type, const json::object& data) {
  if (!type.empty()) out.append("event: ").append(type).append("\n");
  out.append("data: ").append(json::serialize(data)).append("\n\n");
}

std::string responses_events(const json::object& whole) {
  auto* output = whole.if_contains("output");
  if (!output || !output->is_array()) return {};
  json::object opening = whole;
  opening["status"] = "in_progress";
  opening["output"] = json::array{};
  opening["usage"] = nullptr;
  numbered_events e;
  e.add("response.created", {{"response", opening}});
  e.add("response.in_progress", {{"response", std::move(opening)}});
  std::int64_t index = 0;
  for (const auto& item : output->get_array())
    if (item.is_object()) output_item(e, index++, item.get_object());
  e.add("response.completed", {{"response", whole}});
  return std::move(e.out);
}

}  // namespace tokengate::cache
