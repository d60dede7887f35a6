// The prefix index (fleet/prefix_index.hpp): prompts that begin alike
// share blocks, whatever conversation or tenant they come from; the
// longest match runs from the first block; the least recently used go
// first, a prompt's end before its beginning; an eviction the engine
// reported drops the blocks past what it held; memory stays bounded.
#include "fleet/prefix_index.hpp"

#include <gtest/gtest.h>

#include <string>

namespace tokengate::fleet {
namespace {

std::vector<std::uint64_t> blocks_of(const std::string& body) {
  routing::scan_error error;
  auto scan = routing::scan_object(body, error);
  EXPECT_TRUE(scan) << error.message;
  return prompt_blocks(body, *scan);
}

// A chat request: a system prompt holding `document`, then `question`.
std::string ask(const std::string& document, const std::string& question,
                const std::string& model = "m") {
  return R"({"model":")" + model + R"(","messages":[{"role":"system","content":")" + document +
         R"("},{"role":"user","content":")" + question + R"("}]})";
}

const std::string document_a(4000, 'a'), document_b(4000, 'b');

TEST(PrefixIndex, TwoUsersOfOneDocumentShareItsBlocks) {
  auto alice = blocks_of(ask(document_a, "What is the first clause?"));
  auto bob = blocks_of(ask(document_a, "Summarise it.", "another-model"));
  ASSERT_GE(alice.size(), 15u);  // 4 KB of document: 16 blocks of 256 bytes, and more
  prefix_index index(1000);
  index.insert(alice);
  // Bob's request shares every block but the ones with his question.
  EXPECT_GE(index.longest_match(bob).held, 15u);
  EXPECT_LT(index.longest_match(bob).held, bob.size());
  EXPECT_EQ(index.longest_match(alice).held, alice.size());
  EXPECT_EQ(index.longest_match(blocks_of(ask(document_b, "Summarise it."))).held, 0u);
}

TEST(PrefixIndex, AConversationsNextTurnMatchesItsHistory) {
  const std::string turn1 =
      R"({"model":"m","messages":[{"role":"user","content":")" + document_a + R"("}]})";
  const std::string turn2 =
      R"({"model":"m","messages":[{"role":"user","content":")" + document_a +
      R"("},{"role":"assistant","content":"Yes."},{"role":"user","content":"Why?"}]})";
  prefix_index index(1000);
  auto first = blocks_of(turn1);
  index.insert(first);
  // All of turn 1 but its last, partial block (which held the array's end).
  EXPECT_EQ(index.longest_match(blocks_of(turn2)).held, first.size() - 1);
}

TEST(PrefixIndex, TheLeastRecentlyUsedGoFirstAPromptsEndBeforeItsBeginning) {
  auto a = blocks_of(ask(document_a, "q"));
  auto b = blocks_of(ask(document_b, "q"));
  prefix_index index(a.size() + b.size() / 2);
  index.insert(a);
  index.insert(b);  // a's end makes room for b
  EXPECT_EQ(index.longest_match(b).held, b.size());
  const auto kept = index.longest_match(a).held;
  EXPECT_GT(kept, 0u) << "a's beginning stays";
  EXPECT_LT(kept, a.size()) << "a's end went";
  EXPECT_EQ(index.size(), a.size() + b.size() / 2);
  index.insert(a);  // used again: the most recent
  EXPECT_EQ(index.longest_match(a).held, a.size());
}

TEST(PrefixIndex, AnEvictionTheEngineReportedDropsWhatFollows) {
  auto a = blocks_of(ask(document_a, "q"));
  prefix_index index(1000);
  index.insert(a);
  index.evicted_past(a, 3);
  EXPECT_EQ(index.longest_match(a).held, 3u);
  EXPECT_EQ(index.size(), 3u);
}

TEST(PrefixIndex, WhatTheEngineReportedCachedCorrectsIt) {
  auto a = blocks_of(ask(document_a, "q"));
  ASSERT_GE(a.size(), 16u);
  prefix_index index(1000);
  index.insert(a);
  const long long predicted = 16 * prefix_block_tokens;
  // Close to the prediction (the engine counts its own tokens): kept.
  index.correct(a, predicted, predicted * 3 / 4);
  EXPECT_EQ(index.longest_match(a).held, a.size());
  // A quarter of it: the engine let the rest go.
  index.correct(a, predicted, predicted / 4);
  EXPECT_EQ(index.longest_match(a).held, 4u);
  index.correct(a, 4 * prefix_block_tokens, 0);
  EXPECT_EQ(index.longest_match(a).held, 0u);
}

TEST(PrefixIndex, BlocksInPrefillArePendingUntilTheirFirstToken) {
  auto alice = blocks_of(ask(document_a, "What is the first clause?"));
  auto bob = blocks_of(ask(document_a, "Summarise it."));
  prefix_index index(1000);
  const auto brought = index.insert_pending(alice);
  EXPECT_EQ(brought.size(), alice.size());  // all new: all pending
  auto seen = index.longest_match(bob);
  EXPECT_GE(seen.held, 15u);
  EXPECT_EQ(seen.ready, 0u);  // held, but not in the engine's cache yet
  EXPECT_TRUE(index.pending(bob.front()));
  // Bob goes behind Alice: he brings only his question.
  const auto bobs = index.insert_pending(bob);
  EXPECT_EQ(bobs.size(), bob.size() - seen.held);
  index.prefilled(brought);
  const auto after = index.longest_match(bob);
  EXPECT_EQ(after.held, bob.size());
  EXPECT_EQ(after.ready, seen.held);  // Alice's part is in; Bob's own is still coming
  EXPECT_FALSE(index.pending(bob.front()));
  // Bob's request failed before its first token: his blocks go, Alice's stay.
  index.abandoned(bobs);
  EXPECT_EQ(index.longest_match(bob).held, seen.held);
  EXPECT_EQ(index.longest_match(alice).held, alice.size());
  EXPECT_EQ(index.size(), alice.size());
}

TEST(PrefixIndex, MemoryIsBoundedByTheCapacity) {
  prefix_index index(64);
  for (int tenant = 0; tenant < 50; ++tenant)
    index.insert(
        blocks_of(ask(std::string(2000, char('a' + tenant % 26)) + std::to_string(tenant), "q")));
  EXPECT_EQ(index.size(), 64u);
  EXPECT_LT(index.bytes(), 64u * 128);
  index.set_capacity(10);
  EXPECT_EQ(index.size(), 10u);
  index.set_capacity(0);
  index.insert(blocks_of(ask(document_a, "q")));
  EXPECT_EQ(index.size(), 0u);
}

TEST(PrefixIndex, TheMembersOfThePromptAreReadInAFixedOrder) {
  // The same prompt with its members in another order, and other members
  // around it, is the same prompt.
  auto one = blocks_of(R"({"model":"m","system":"be brief","max_tokens":5,"messages":[]})");
  auto two = blocks_of(R"({"messages":[],"stream":true,"system":"be brief","model":"x"})");
  EXPECT_EQ(one, two);
  EXPECT_TRUE(blocks_of(R"({"model":"m"})").empty());
}

}  // namespace
}  // namespace tokengate::fleet
