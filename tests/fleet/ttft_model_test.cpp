// The time-to-first-token model (fleet/ttft_model.hpp): on a replica whose
// TTFT is a fixed base plus a fixed time per uncached token, it converges
// on both; it follows a replica that slows down; the wait for a slot is
// the requests ahead times the rate at which a full replica's slots come
// free; before any data, the prior.
#include "fleet/ttft_model.hpp"

#include <gtest/gtest.h>

#include <random>

namespace tokengate::fleet {
namespace {

// An engine prefilling `rate` tokens a second after a fixed `base`.
void feed(ttft_model& m, double base, double rate, int n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> tokens(0, 8000), jitter(0.95, 1.05);
  for (int i = 0; i < n; ++i) {
    const double x = tokens(rng);
    m.observe_prefill(x, (base + x / rate) * jitter(rng));
  }
}

TEST(TtftModel, ConvergesOnAKnownEngine) {
  ttft_model m;
  std::mt19937_64 rng(1);
  feed(m, 0.030, 20000, 200, rng);
  EXPECT_NEAR(m.prefill_tokens_per_second(), 20000, 20000 * 0.1);
  EXPECT_NEAR(m.base_seconds(), 0.030, 0.010);
  EXPECT_NEAR(m.predict(6000, 0), 0.030 + 6000.0 / 20000, 0.03);
}

TEST(TtftModel, FollowsAnEngineThatSlowsDown) {
  ttft_model m;
  std::mt19937_64 rng(2);
  feed(m, 0.030, 20000, 200, rng);
  feed(m, 0.030, 5000, 100, rng);  // four times slower now
  EXPECT_NEAR(m.predict(4000, 0), 0.030 + 4000.0 / 5000, 0.1);
}

TEST(TtftModel, TheWaitIsTheRequestsAheadAtTheRateSlotsComeFree) {
  ttft_model m;
  auto t = ttft_model::clock::now();
  for (int i = 0; i < 200; ++i) m.observe_end(t += std::chrono::milliseconds(250));
  EXPECT_NEAR(m.slots_per_second(), 4, 0.1);
  EXPECT_NEAR(m.wait_seconds(3), 0.75, 0.02);
  EXPECT_NEAR(m.predict(0, 3) - m.predict(0, 0), m.wait_seconds(3), 1e-9);
}

TEST(TtftModel, ThePriorHoldsBeforeAnyData) {
  ttft_model m;
  EXPECT_NEAR(m.prefill_tokens_per_second(), 5000, 1);
  EXPECT_NEAR(m.predict(5000, 0), 0.05 + 1.0, 1e-6);
  // All of one length: no slope to learn, the prior's rate stays.
  for (int i = 0; i < 50; ++i) m.observe_prefill(1000, 0.25);
  EXPECT_NEAR(m.predict(1000, 0), 0.25, 0.02);
}

}  // namespace
}  // namespace tokengate::fleet
