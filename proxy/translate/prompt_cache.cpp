#include "translate/prompt_cache.hpp"

#include <boost/json.hpp>
#include <optional>

namespace tokengate::translate {
namespace {

namespace json = boost::json;

json::object ephemeral() { return {{"type", "ephemeral"}}; }

// Estimated tokens as the route's estimate counts them: bytes / 4.
std::size_t bytes_of(const json::value& v) {
  return v.is_string() ? v.get_string().size() : json::serialize(v).size();
}

// The last block of a message's content, if it has blocks.
json::object* last_block(json::value& message) {
  auto* content = message.is_object() ? message.get_object().if_contains("content") : nullptr;
  if (!content || !content->is_array() || content->get_array().empty()) return nullptr;
  return content->get_array().back().if_object();
}

bool is_user(const json::value& message) {
  const auto* role = message.is_object() ? message.get_object().if_contains("role") : nullptr;
  return role && role->is_string() && role->get_string() == "user";
}

class placement {
 public:
  explicit placement(long long min_tokens) : min_bytes_(static_cast<std::size_t>(min_tokens) * 4) {}

  void tools(json::value* v) {
    if (!v || !v->is_array() || v->get_array().empty()) return;
    for (const auto& tool : v->get_array()) bytes_ += bytes_of(tool);
    if (auto* last = v->get_array().back().if_object()) mark(*last);
  }

  // A string system prompt becomes one text block (only blocks carry the
  // marker) where it gets one; else it stays as the client wrote it.
  void system(json::object& request) {
    auto* v = request.if_contains("system");
    if (!v) return;
    if (v->is_string()) {
      bytes_ += v->get_string().size();
      if (!room()) return;
      json::object block{{"type", "text"}, {"text", v->get_string()}};
      mark(block);
      *v = json::array{std::move(block)};
      return;
    }
    if (!v->is_array() || v->get_array().empty()) return;
    for (const auto& block : v->get_array()) bytes_ += bytes_of(block);
    if (auto* last = v->get_array().back().if_object()) mark(*last);
  }

  void messages(json::value* v) {
    if (!v || !v->is_array()) return;
    auto& list = v->get_array();
    std::optional<std::size_t> final_turn, turn_before;
    for (std::size_t i = 0; i < list.size(); ++i)
      if (is_user(list[i])) {
        turn_before = final_turn;
        final_turn = i;
      }
    std::size_t at = 0;
    for (auto turn : {turn_before, final_turn}) {
      if (!turn) continue;
      for (; at <= *turn; ++at) bytes_ += bytes_of(list[at]);
      if (auto* block = last_block(list[*turn])) mark(*block);
    }
  }

  std::size_t placed() const { return placed_; }

 private:
  // Whether a breakpoint here would be long enough, and one is left.
  bool room() const { return bytes_ >= min_bytes_ && placed_ < max_cache_breakpoints; }
  void mark(json::object& block) {
    if (!room()) return;
    block["cache_control"] = ephemeral();
    ++placed_;
  }

  std::size_t min_bytes_;
  std::size_t bytes_ = 0;
  std::size_t placed_ = 0;
};

}  // namespace

std::size_t place_cache_breakpoints(json::object& request, long long min_tokens) {
  placement p(min_tokens);
  p.tools(request.if_contains("tools"));
  p.system(request);
  p.messages(request.if_contains("messages"));
  return p.placed();
}

}  // namespace tokengate::translate
