#pragma once
// What each replica's prefix cache holds, as this instance sent it.
//
// A request's prompt is cut into blocks of its canonical text (the
// members that make the prompt, in a fixed order: Anthropic's `system`,
// Responses' `instructions`, `tools`, then `messages`, `input` or
// `prompt`, as the client wrote them), each named by a hash chained from
// the first block, so that two requests that begin alike share their
// first blocks, and a block's name says everything before it: a tenant's
// document, a system prompt, a conversation's history. A replica's index
// keeps the blocks sent there, least recently used dropped first, up to
// its KV capacity; a prompt's blocks are touched last to first, so that a
// prompt's end goes before its beginning, as an engine's cache lets go of
// them. The match is the longest run of a prompt's blocks, from the
// first, that the replica holds.
//
// Blocks sent there are not in the engine's cache until their prompt's
// prefill is over: until then they are pending (the request that sent
// them says when it is over, or that it never will be), and a request
// that would use them does better to wait for them than to prefill them
// a second time beside the first.
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "routing/json_scan.hpp"

namespace tokengate::fleet {

// About 64 tokens of text a block (bytes / 4, as the policy estimates).
constexpr std::size_t prefix_block_bytes = 256;
constexpr std::size_t prefix_block_tokens = prefix_block_bytes / 4;

// The chained names of the body's prompt blocks (a last, partial block
// included).
std::vector<std::uint64_t> prompt_blocks(std::string_view body,
                                         const routing::scanned_object& scan);

class prefix_index {
 public:
  explicit prefix_index(std::size_t capacity_blocks = 0) : capacity_(capacity_blocks) {}

  // At most this many blocks (0: none kept); a smaller bound drops the
  // least recently used at once.
  void set_capacity(std::size_t blocks);
  struct match {
    std::size_t held = 0;   // how many of the blocks, from the first, it holds
    std::size_t ready = 0;  // … of which, from the first, none is pending
  };
  match longest_match(std::span<const std::uint64_t> blocks) const;
  // The blocks were sent there: held, the first most recently used.
  void insert(std::span<const std::uint64_t> blocks);
  // … and those it did not hold yet are pending until `prefilled` or
  // `abandoned` is told them (returned).
  std::vector<std::uint64_t> insert_pending(std::span<const std::uint64_t> blocks);
  void prefilled(std::span<const std::uint64_t> pending);
  // Their prefill never ended: the engine holds none of them.
  void abandoned(std::span<const std::uint64_t> pending);
  bool pending(std::uint64_t block) const;
  // The engine said it held only the first `held` of `blocks`: the rest
  // were evicted there, and go here too.
  void evicted_past(std::span<const std::uint64_t> blocks, std::size_t held);
  // What the engine reported cached of a prompt whose first
  // `predicted_tokens` the index said it held: well under that (under
  // half: the engine counts its own tokens, the index 4 bytes a token),
  // its cache let the rest go, and so does the index.
  void correct(std::span<const std::uint64_t> blocks, long long predicted_tokens,
               long long reported_tokens);

  std::size_t size() const;
  // What the index takes in memory, about (its nodes).
  std::size_t bytes() const;

 private:
  void drop_least_recent();
  void insert_one(std::uint64_t block, bool* was_new);  // (under the lock)
  void forget(std::uint64_t block);                     // (the same)

  mutable std::mutex lock_;          // (every worker reads and writes it)
  std::list<std::uint64_t> recent_;  // most recently used first
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> where_;
  std::unordered_map<std::uint64_t, int> pending_;  // by how many requests bringing it
  std::size_t capacity_;
};

}  // namespace tokengate::fleet
