// The message instances share their prompts' blocks in: read back as
// written, and anything else (a cut message, a stranger's bytes) refused.
#include "fleet/index_sharing.hpp"

#include <gtest/gtest.h>

namespace tokengate::fleet {
namespace {

TEST(IndexSharing, AMessageReadsBackAsWritten) {
  const std::vector<std::uint64_t> blocks{1, 0xffffffffffffffffULL, 42};
  auto bytes = index_sharing::encode(7, "engine-2", blocks);
  EXPECT_EQ(bytes.size(), 8 + 1 + 8 + 3 * 8u);
  auto m = index_sharing::decode(bytes);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->instance, 7u);
  EXPECT_EQ(m->upstream, "engine-2");
  EXPECT_EQ(m->blocks, blocks);
}

TEST(IndexSharing, APromptPastTheBoundSendsItsBeginning) {
  std::vector<std::uint64_t> blocks(index_sharing::max_blocks + 10);
  for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = i;
  auto m = index_sharing::decode(index_sharing::encode(1, "e", blocks));
  ASSERT_TRUE(m);
  ASSERT_EQ(m->blocks.size(), index_sharing::max_blocks);
  EXPECT_EQ(m->blocks.back(), index_sharing::max_blocks - 1);
}

TEST(IndexSharing, WhatIsNotAMessageIsRefused) {
  auto bytes = index_sharing::encode(7, "engine-2", std::vector<std::uint64_t>{1, 2});
  EXPECT_FALSE(index_sharing::decode(bytes.substr(0, bytes.size() - 3)));  // a cut block
  EXPECT_FALSE(index_sharing::decode(bytes.substr(0, 12)));                // a cut name
  EXPECT_FALSE(index_sharing::decode("hello"));
  EXPECT_FALSE(index_sharing::decode(""));
}

}  // namespace
}  // namespace tokengate::fleet
