#pragma once
// Reading members of a parsed event (Boost.JSON) the way every dialect's
// full reading does: a member of the wrong type reads as absent.
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tokengate::stream::json_fields {

namespace json = boost::json;

inline std::string_view str(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

// A chat delta's or message's reasoning text: reasoning_content (DeepSeek,
// llama.cpp, SGLang) or reasoning (vLLM since 0.10, Ollama).
inline std::string_view chat_reasoning(const json::object& o) {
  auto r = str(o, "reasoning_content");
  return r.empty() ? str(o, "reasoning") : r;
}

inline const json::object* obj(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_object() ? &v->get_object() : nullptr;
}

inline const json::array* arr(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_array() ? &v->get_array() : nullptr;
}

inline std::optional<std::int64_t> integer(const json::object* o, std::string_view key) {
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

}  // namespace tokengate::stream::json_fields
