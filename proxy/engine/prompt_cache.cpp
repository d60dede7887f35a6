#include "engine/prompt_cache.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <optional>
#include <vector>

#include "engine/demo_text.hpp"

namespace tokengate::engine {
namespace {

namespace json = boost::json;

// After each block of the prompt: the hash of everything so far, its
// tokens, and whether the block carries a breakpoint.
struct boundary {
  std::uint64_t hash;
  std::size_t tokens;
  bool breakpoint;
};

// The prompt in Anthropic's cache order, block by block.
class prompt_walk {
 public:
  void tools(const json::value& v) {
    if (!v.is_array()) return;
    for (const auto& tool : v.get_array()) block(tool, json::serialize(tool).size());
  }
  void system(const json::value& v) { blocks(v); }
  void messages(const json::value& v) {
    if (!v.is_array()) return;
    for (const auto& m : v.get_array()) {
      if (!m.is_object()) continue;
      const auto* role = m.get_object().if_contains("role");
      mix(role && role->is_string() ? std::string_view(role->get_string()) : "?");
      if (const auto* content = m.get_object().if_contains("content")) blocks(*content);
    }
  }

  std::vector<boundary> boundaries;
  std::size_t marks = 0;
  std::size_t bytes = 0;
  std::optional<std::string> error;

 private:
  void blocks(const json::value& v) {
    if (v.is_string()) return block(v, text_bytes(v));
    if (v.is_array())
      for (const auto& b : v.get_array()) block(b, text_bytes(b));
  }

  // One block: hashed without its marker, a string as the text block it means.
  void block(const json::value& v, std::size_t text) {
    const json::value* marker = nullptr;
    std::string canonical;
    if (v.is_object()) {
      marker = v.get_object().if_contains("cache_control");
      json::object copy = v.get_object();
      copy.erase("cache_control");
      canonical = json::serialize(copy);
    } else {
      canonical = json::serialize(json::object{{"type", "text"}, {"text", v}});
    }
    mix(canonical);
    bytes += text;
    if (marker) check(*marker);
    boundaries.push_back({hash_, bytes / 4, marker != nullptr});
  }

  void check(const json::value& marker) {
    ++marks;
    const auto* o = marker.if_object();
    const auto* type = o ? o->if_contains("type") : nullptr;
    if (!type || !type->is_string() || type->get_string() != "ephemeral")
      error = "cache_control.type: Input should be 'ephemeral'";
  }

  // FNV-1a, with a separator so that blocks cannot run into each other.
  void mix(std::string_view bytes) {
    for (unsigned char c : bytes) hash_ = (hash_ ^ c) * 0x100000001b3ULL;
    hash_ = (hash_ ^ 0xffU) * 0x100000001b3ULL;
  }

  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace

bool prompt_cache::live(std::uint64_t hash, clock::time_point now) const {
  auto it = expiry_.find(hash);
  return it != expiry_.end() && it->second > now;
}

void prompt_cache::keep(std::uint64_t hash, clock::time_point now) {
  if (expiry_.size() >= max_entries && !expiry_.count(hash)) {
    std::erase_if(expiry_, [&](const auto& e) { return e.second <= now; });
    if (expiry_.size() >= max_entries) expiry_.erase(expiry_.begin());
  }
  expiry_[hash] = now + ttl_;
}

std::variant<prompt_cache_usage, std::string> prompt_cache::use(const json::object& request,
                                                                clock::time_point now) {
  prompt_walk walk;
  if (const auto* v = request.if_contains("tools")) walk.tools(*v);
  if (const auto* v = request.if_contains("system")) walk.system(*v);
  if (const auto* v = request.if_contains("messages")) walk.messages(*v);
  if (walk.marks > max_breakpoints)
    return "A maximum of " + std::to_string(max_breakpoints) +
           " blocks with cache_control may be provided. Found " + std::to_string(walk.marks) + ".";
  if (walk.error) return *walk.error;
  prompt_cache_usage usage;
  usage.total = walk.bytes / 4 + 1;
  usage.marked = walk.marks > 0;
  const auto& b = walk.boundaries;
  // The longest cached prefix ending at a breakpoint or a block shortly before one.
  std::optional<std::size_t> hit;
  for (std::size_t k = 0; k < b.size(); ++k) {
    if (!b[k].breakpoint) continue;
    for (std::size_t j = k + 1; j-- > 0 && k - j < lookback_blocks;)
      if (live(b[j].hash, now)) {
        if (!hit || b[j].tokens > b[*hit].tokens) hit = j;
        break;
      }
  }
  if (hit) {
    usage.read = b[*hit].tokens;
    keep(b[*hit].hash, now);  // (a read refreshes the entry's lifetime)
  }
  std::size_t top = 0;
  for (const auto& at : b)
    if (at.breakpoint && at.tokens >= min_tokens_) {
      keep(at.hash, now);
      top = std::max(top, at.tokens);
    }
  usage.written = top > usage.read ? top - usage.read : 0;
  return usage;
}

}  // namespace tokengate::engine
