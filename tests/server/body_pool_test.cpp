// The buffers of long request bodies a worker keeps for the next ones
// (server/body_pool.hpp): which one a body gets, what is kept, for how long.
#include "server/body_pool.hpp"

#include <gtest/gtest.h>

namespace tokengate {
namespace {

using namespace std::chrono_literals;

body_bytes buffer_of(std::size_t capacity) {
  body_bytes b;
  b.reserve(capacity);
  return b;
}

TEST(BodyPool, ABodyGetsTheSmallestKeptBufferThatHoldsIt) {
  body_pool pool;
  const auto t = body_pool::clock::now();
  auto small = buffer_of(64 * 1024), middle = buffer_of(256 * 1024), large = buffer_of(1024 * 1024);
  const char* middle_bytes = middle.data();
  pool.give_back(std::move(small), t);
  pool.give_back(std::move(middle), t);
  pool.give_back(std::move(large), t);
  ASSERT_EQ(pool.kept_buffers(), 3u);

  auto body = pool.take(200'000);
  EXPECT_EQ(body.data(), middle_bytes)
      << "the 256 KiB buffer, neither the 64 KiB nor the 1 MiB one";
  EXPECT_EQ(body.size(), 200'000u);
  EXPECT_EQ(pool.kept_buffers(), 2u);
  EXPECT_EQ(pool.kept_bytes(), (64 + 1024) * 1024u);
}

TEST(BodyPool, ABodyLargerThanEveryKeptBufferGetsANewOneAndLeavesThemKept) {
  body_pool pool;
  pool.give_back(buffer_of(64 * 1024));
  auto body = pool.take(100'000);
  EXPECT_EQ(body.size(), 100'000u);
  EXPECT_EQ(pool.kept_buffers(), 1u);
}

TEST(BodyPool, ShortBodiesAreNeitherKeptNorTakenFromThePool) {
  body_pool pool;
  pool.give_back(buffer_of(body_pool::kept_from - 1));
  EXPECT_EQ(pool.kept_buffers(), 0u);

  auto kept = buffer_of(64 * 1024);
  const char* kept_bytes = kept.data();
  pool.give_back(std::move(kept));
  auto body = pool.take(1000);
  EXPECT_NE(body.data(), kept_bytes) << "a short body comes from the heap's small pages";
  EXPECT_EQ(body.size(), 1000u);
  EXPECT_EQ(pool.kept_buffers(), 1u);
}

TEST(BodyPool, WhatThePoolKeepsIsBounded) {
  body_pool pool(1024 * 1024);
  for (int i = 0; i < 3; ++i) pool.give_back(buffer_of(400 * 1024));
  EXPECT_EQ(pool.kept_buffers(), 2u) << "a third 400 KiB buffer would pass 1 MiB";
  EXPECT_EQ(pool.kept_bytes(), 800 * 1024u);
}

TEST(BodyPool, ABufferNotTakenForTheKeptTimeIsFreed) {
  body_pool pool(body_pool::default_max_bytes, 10s);
  const auto t = body_pool::clock::now();
  pool.give_back(buffer_of(64 * 1024), t);
  pool.give_back(buffer_of(128 * 1024), t + 6s);

  pool.release_unused(t + 9s);
  EXPECT_EQ(pool.kept_buffers(), 2u) << "neither has waited 10 s";
  pool.release_unused(t + 10s);
  EXPECT_EQ(pool.kept_buffers(), 1u);
  EXPECT_EQ(pool.kept_bytes(), 128 * 1024u) << "the one given back 6 s later stays";
  pool.release_unused(t + 16s);
  EXPECT_EQ(pool.kept_buffers(), 0u);
}

TEST(BodyPool, TheKeptBytesAreReportedInTheGauge) {
  metrics::counter gauge;
  body_pool pool;
  pool.give_back(buffer_of(64 * 1024));
  pool.report_kept_bytes_to(gauge);
  EXPECT_EQ(gauge.get(), 64 * 1024u) << "what was kept before the gauge counts";
  pool.give_back(buffer_of(128 * 1024));
  EXPECT_EQ(gauge.get(), 192 * 1024u);
  auto body = pool.take(100'000);
  EXPECT_EQ(gauge.get(), 64 * 1024u);
  pool.release_unused(body_pool::clock::now() + body_pool::default_kept_for);
  EXPECT_EQ(gauge.get(), 0u);
}

TEST(BodyPool, ARequestsBodyGoesBackHoweverTheRequestEnds) {
  body_pool pool;
  {
    body_bytes body = pool.take(100'000);
    body_given_back on_exit(pool, body);
  }
  EXPECT_EQ(pool.kept_buffers(), 1u);
  EXPECT_GE(pool.kept_bytes(), 100'000u);
}

}  // namespace
}  // namespace tokengate
