#include "cache/cached_share.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace tokengate::cache {
namespace {

namespace json = boost::json;

std::int64_t count_at(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_int64() ? v->get_int64() : v && v->is_uint64() ? v->get_uint64() : 0;
}

// The details object under `key`, made when missing (or null).
json::object& details_at(json::object& usage, std::string_view key) {
  auto& v = usage[key];
  if (!v.is_object()) v = json::object();
  return v.get_object();
}

bool mark(dialect d, json::object& usage) {
  switch (d) {
    case dialect::openai_chat:
    case dialect::openai_completions:
      if (!usage.contains("prompt_tokens")) return false;
      details_at(usage, "prompt_tokens_details")["cached_tokens"] =
          count_at(usage, "prompt_tokens");
      return true;
    case dialect::openai_responses:
      if (!usage.contains("input_tokens")) return false;
      details_at(usage, "input_tokens_details")["cached_tokens"] = count_at(usage, "input_tokens");
      return true;
    case dialect::anthropic_messages: {
      if (!usage.contains("input_tokens")) return false;
      auto prompt = count_at(usage, "input_tokens") + count_at(usage, "cache_read_input_tokens") +
                    count_at(usage, "cache_creation_input_tokens");
      usage["input_tokens"] = 0;
      usage["cache_creation_input_tokens"] = 0;
      usage["cache_read_input_tokens"] = prompt;
      return true;
    }
    default:
      return false;
  }
}

// Whether a usage object is written in it at all (chat chunks carry
// `"usage":null` on every event: those are not parsed).
bool has_usage(std::string_view document) {
  for (auto at = document.find("\"usage\""); at != std::string_view::npos;
       at = document.find("\"usage\"", at + 1)) {
    auto value = document.find_first_not_of(" \t\r\n:", at + 7);
    if (value != std::string_view::npos && document[value] == '{') return true;
  }
  return false;
}

bool mark_under(dialect d, json::object& o) {
  auto* usage = o.if_contains("usage");
  return usage && usage->is_object() && mark(d, usage->get_object());
}

}  // namespace

std::string with_cached_share(dialect d, std::string_view document) {
  if (!has_usage(document)) return {};
  boost::system::error_code ec;
  auto parsed = json::parse(document, ec);
  if (ec || !parsed.is_object()) return {};
  auto& o = parsed.get_object();
  bool marked = mark_under(d, o);
  for (std::string_view inner : {"message", "response"})
    if (auto* v = o.if_contains(inner); v && v->is_object())
      marked = mark_under(d, v->get_object()) || marked;
  return marked ? json::serialize(parsed) : std::string();
}

}  // namespace tokengate::cache
