#include "engine/demo_text.hpp"

#include <array>
#include <boost/json/value.hpp>

namespace tokengate::engine {
namespace {

constexpr std::array<std::string_view, 24> words{
    "The",   " quick", " brown", " fox",   " jumps",   " over",  " the",     " lazy",
    " dog",  " while", " the",   " proxy", " relays",  " every", " token",   " as",
    " soon", " as",    " it",    " is",    " decoded", ",",      " without", " delay."};

}  // namespace

std::size_t text_bytes(const boost::json::value& v) {
  if (v.is_string()) return v.get_string().size();
  std::size_t n = 0;
  if (v.is_array())
    for (const auto& item : v.get_array()) n += text_bytes(item);
  if (v.is_object()) {
    const auto& o = v.get_object();
    if (auto* t = o.if_contains("text")) n += text_bytes(*t);
    if (auto* c = o.if_contains("content")) n += text_bytes(*c);
  }
  return n;
}

std::string_view demo_token(std::size_t i) { return words[i % words.size()]; }

std::size_t estimate_prompt_tokens(const boost::json::object& request) {
  std::size_t bytes = 0;
  for (const char* key : {"messages", "prompt", "input", "system"})
    if (auto* v = request.if_contains(key)) bytes += text_bytes(*v);
  return bytes / 4 + 1;
}

}  // namespace tokengate::engine
