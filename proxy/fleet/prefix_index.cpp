#include "fleet/prefix_index.hpp"

#include <cstring>

namespace tokengate::fleet {
namespace {

// A block's name: its bytes mixed into the name of everything before it,
// 32 bytes a step in four independent lanes (the multiplications of one
// step overlap: a 120 KB prompt, 30,000 tokens, is named in a few
// microseconds, where a byte-wise hash takes a hundred).
std::uint64_t chain(std::uint64_t before, std::string_view bytes) {
  constexpr std::uint64_t k1 = 0xff51afd7ed558ccdULL, k2 = 0xc4ceb9fe1a85ec53ULL;
  std::uint64_t lane[4] = {before ^ k1, before ^ k2, before + bytes.size(), ~before};
  std::size_t i = 0;
  for (; i + 32 <= bytes.size(); i += 32)
    for (int l = 0; l < 4; ++l) {
      std::uint64_t word;
      std::memcpy(&word, bytes.data() + i + 8 * l, 8);
      lane[l] = (lane[l] ^ word) * k1;
      lane[l] ^= lane[l] >> 31;
    }
  std::uint64_t h = lane[0] ^ (lane[1] * k2) ^ (lane[2] * k1) ^ (lane[3] * k2);
  for (; i < bytes.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, std::min<std::size_t>(8, bytes.size() - i));
    h = (h ^ word) * k2;
    h ^= h >> 29;
  }
  h ^= h >> 33;
  h *= k1;
  return h ^ (h >> 33);
}

// The prompt's text in a fixed order of its members, cut into blocks.
class block_cutter {
 public:
  explicit block_cutter(std::vector<std::uint64_t>& out) : out_(out) {}
  void add(std::string_view text) {
    while (!text.empty()) {
      if (pending_.empty() && text.size() >= prefix_block_bytes) {  // (no copy)
        name(text.substr(0, prefix_block_bytes));
        text.remove_prefix(prefix_block_bytes);
        continue;
      }
      auto take = std::min(text.size(), prefix_block_bytes - pending_.size());
      pending_.append(text.substr(0, take));
      text.remove_prefix(take);
      if (pending_.size() == prefix_block_bytes) flush();
    }
  }
  void flush() {
    if (pending_.empty()) return;
    name(pending_);
    pending_.clear();
  }

 private:
  void name(std::string_view block) {
    last_ = chain(last_, block);
    out_.push_back(last_);
  }

  std::vector<std::uint64_t>& out_;
  std::string pending_;
  std::uint64_t last_ = 0x6a09e667f3bcc908ULL;
};

}  // namespace

std::vector<std::uint64_t> prompt_blocks(std::string_view body,
                                         const routing::scanned_object& scan) {
  std::vector<std::uint64_t> blocks;
  blocks.reserve(body.size() / prefix_block_bytes + 2);
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

prefix_index::match prefix_index::longest_match(std::span<const std::uint64_t> blocks) const {
  std::lock_guard guard(lock_);
  // A block held means every block before it is: each use of a block
  // touches those before it after it, so they are always the more recent
  // and are evicted later. A prompt held whole costs one lookup.
  match m;
  if (!blocks.empty() && where_.contains(blocks.back())) {
    m.held = blocks.size();
  } else {
    while (m.held < blocks.size() && where_.contains(blocks[m.held])) ++m.held;
  }
  m.ready = m.held;
  // Pending blocks are the end of what some request brought, and a block
  // is ready only once those before it are (its prefill came after
  // theirs): a ready last block means a ready match, in one lookup.
  if (m.held > 0 && pending_.contains(blocks[m.held - 1]))
    for (std::size_t i = 0; i < m.held; ++i)
      if (pending_.contains(blocks[i])) {
        m.ready = i;
        break;
      }
  return m;
}

void prefix_index::insert_one(std::uint64_t block, bool* was_new) {
  if (auto at = where_.find(block); at != where_.end()) {
    recent_.splice(recent_.begin(), recent_, at->second);
    return;
  }
  recent_.push_front(block);
  where_.emplace(block, recent_.begin());
  *was_new = true;
  if (where_.size() > capacity_) drop_least_recent();
}

void prefix_index::insert(std::span<const std::uint64_t> blocks) {
  std::lock_guard guard(lock_);
  if (capacity_ == 0) return;
  bool was_new = false;
  // Last to first: the prompt's first block ends up the most recent.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) insert_one(*it, &was_new);
}

std::vector<std::uint64_t> prefix_index::insert_pending(std::span<const std::uint64_t> blocks) {
  std::vector<std::uint64_t> marked;
  std::lock_guard guard(lock_);
  if (capacity_ == 0) return marked;
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    bool was_new = false;
    insert_one(*it, &was_new);
    if (!was_new) continue;
    ++pending_[*it];
    marked.push_back(*it);
  }
  return marked;
}

void prefix_index::prefilled(std::span<const std::uint64_t> pending) {
  std::lock_guard guard(lock_);
  for (auto block : pending)
    if (auto at = pending_.find(block); at != pending_.end() && --at->second <= 0)
      pending_.erase(at);
}

void prefix_index::abandoned(std::span<const std::uint64_t> pending) {
  std::lock_guard guard(lock_);
  for (auto block : pending) {
    auto at = pending_.find(block);
    if (at == pending_.end()) continue;
    if (--at->second > 0) continue;  // (another request's prefill may still bring it)
    pending_.erase(at);
    forget(block);
  }
}

bool prefix_index::pending(std::uint64_t block) const {
  std::lock_guard guard(lock_);
  return pending_.contains(block);
}

void prefix_index::forget(std::uint64_t block) {
  if (auto at = where_.find(block); at != where_.end()) {
    recent_.erase(at->second);
    where_.erase(at);
  }
}

void prefix_index::evicted_past(std::span<const std::uint64_t> blocks, std::size_t held) {
  std::lock_guard guard(lock_);
  for (std::size_t i = held; i < blocks.size(); ++i) forget(blocks[i]);
}

void prefix_index::correct(std::span<const std::uint64_t> blocks, long long predicted_tokens,
                           long long reported_tokens) {
  if (predicted_tokens <= 0 || reported_tokens * 2 >= predicted_tokens) return;
  const auto matched = static_cast<std::size_t>(predicted_tokens) / prefix_block_tokens;
  evicted_past(blocks, std::min(blocks.size(), matched) *
                           static_cast<std::size_t>(reported_tokens) /
                           static_cast<std::size_t>(predicted_tokens));
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
