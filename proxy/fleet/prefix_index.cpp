#include "fleet/prefix_index.hpp"

#include <cstring>

namespace tokengate::fleet {
namespace {

// A block's name: its bytes mixed eight at a time into the name of
// everything before it (a 30,000-token prompt is 120 KB: about 15,000
// multiplications, not 120,000 as a byte-wise hash takes).
std::uint64_t chain(std::uint64_t before, std::string_view bytes) {
  std::uint64_t h = before ^ (bytes.size() * 0x9e3779b97f4a7c15ULL);
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    h = (h ^ word) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  h = (h ^ tail) * 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 29);
}

// The prompt's text in a fixed order of its members, cut into blocks.
class block_cutter {
 public:
  explicit block_cutter(std::vector<std::uint64_t>& out) : out_(out) {}
  void add(std::string_view text) {
    while (!text.empty()) {
      auto take = std::min(text.size(), prefix_block_bytes - pending_.size());
      pending_.append(text.substr(0, take));
      text.remove_prefix(take);
      if (pending_.size() == prefix_block_bytes) flush();
    }
  }
  void flush() {
    if (pending_.empty()) return;
    last_ = chain(last_, pending_);
    out_.push_back(last_);
    pending_.clear();
  }

 private:
  std::vector<std::uint64_t>& out_;
  std::string pending_;
  std::uint64_t last_ = 0x6a09e667f3bcc908ULL;
};

}  // namespace

std::vector<std::uint64_t> prompt_blocks(std::string_view body,
                                         const routing::scanned_object& scan) {
  std::vector<std::uint64_t> blocks;
  block_cutter cut(blocks);
  for (const char* key : {"system", "instructions", "tools", "messages", "input", "prompt"})
    if (const auto* m = scan.find(key)) cut.add(body.substr(m->begin, m->end - m->begin));
  cut.flush();
  return blocks;
}

void prefix_index::set_capacity(std::size_t blocks) {
  std::lock_guard guard(lock_);
  capacity_ = blocks;
  while (where_.size() > capacity_) drop_least_recent();
}

std::size_t prefix_index::longest_match(std::span<const std::uint64_t> blocks) const {
  std::lock_guard guard(lock_);
  std::size_t n = 0;
  while (n < blocks.size() && where_.contains(blocks[n])) ++n;
  return n;
}

void prefix_index::insert(std::span<const std::uint64_t> blocks) {
  std::lock_guard guard(lock_);
  if (capacity_ == 0) return;
  // Last to first: the prompt's first block ends up the most recent.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    if (auto at = where_.find(*it); at != where_.end()) {
      recent_.splice(recent_.begin(), recent_, at->second);
      continue;
    }
    recent_.push_front(*it);
    where_.emplace(*it, recent_.begin());
    if (where_.size() > capacity_) drop_least_recent();
  }
}

void prefix_index::evicted_past(std::span<const std::uint64_t> blocks, std::size_t held) {
  std::lock_guard guard(lock_);
  for (std::size_t i = held; i < blocks.size(); ++i)
    if (auto at = where_.find(blocks[i]); at != where_.end()) {
      recent_.erase(at->second);
      where_.erase(at);
    }
}

std::size_t prefix_index::size() const {
  std::lock_guard guard(lock_);
  return where_.size();
}

std::size_t prefix_index::bytes() const {
  // A list node (two pointers and the name) and a hash node (the name,
  // the iterator, the next pointer, the cached hash) with their bucket.
  return size() * (3 * sizeof(void*) + 4 * sizeof(void*) + sizeof(void*));
}

void prefix_index::drop_least_recent() {
  where_.erase(recent_.back());
  recent_.pop_back();
}

}  // namespace tokengate::fleet
