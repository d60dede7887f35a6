// What balance: fastest's choice costs per request (fleet/prefix_index,
// fleet/ttft_model): a 30,000-token prompt (120 KB) cut into its blocks,
// each replica's index asked for its longest match, its prefill in flight
// and its model for the prediction, and the chosen replica's index
// touched (its new blocks pending, then prefilled), for 3 and for 32
// replicas; once with one replica holding the whole prompt (the usual
// case: a tenant's document on its replica), once with every replica
// holding it (the worst: every match runs the prompt's length).
// Microseconds per request, the request repeated 2,000 times. On demand,
// not a test:
//   g++ -std=c++20 -O2 -Iproxy tests/bench/fleet_choice_cost.cpp build/libtokengate_core.a \
//     -lboost_json -lssl -lcrypto -o /tmp/fleet_choice_cost && taskset -c 0 /tmp/fleet_choice_cost
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fleet/upstream_load.hpp"
#include "routing/json_scan.hpp"

using namespace tokengate;

int main() {
  std::string document;
  while (document.size() < 120'000) document += "Clause of the tenant's handbook, word by word. ";
  const std::string body = R"({"model":"m","messages":[{"role":"system","content":")" + document +
                           R"("},{"role":"user","content":"What does clause 7 say?"}]})";
  routing::scan_error error;
  auto scan = routing::scan_object(body, error);
  if (!scan) return 1;
  for (int replicas : {3, 32}) {
    for (bool everywhere : {false, true}) {
      std::vector<std::unique_ptr<fleet::upstream_load>> loads;
      const auto blocks = fleet::prompt_blocks(body, *scan);
      for (int r = 0; r < replicas; ++r) {
        loads.push_back(std::make_unique<fleet::upstream_load>("e" + std::to_string(r)));
        loads.back()->index.set_capacity(32'000);
        if (everywhere || r == 0) loads.back()->index.insert(blocks);
      }
      constexpr int rounds = 2000;
      double sink = 0;
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < rounds; ++i) {
        auto b = fleet::prompt_blocks(body, *scan);
        std::size_t best = 0;
        double fastest = 1e18;
        for (int r = 0; r < replicas; ++r) {
          auto& load = *loads[r];
          const double held = double(load.index.longest_match(b).held * fleet::prefix_block_tokens);
          const double ahead = load.prefill_left(load.ttft.prefill_tokens_per_second());
          double t = load.ttft.predict(std::max(0.0, 30'000 - held) + ahead, 0);
          if (t < fastest) fastest = t, best = r;
        }
        // (the slot brings the prompt to the index; its first token ends the prefill)
        auto brought = loads[best]->index.insert_pending(b);
        loads[best]->index.prefilled(brought);
        sink += fastest;
      }
      double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count() /
          rounds;
      std::printf("%2d replicas, prompt held by %-4s %7.1f us per request (%zu blocks)%s\n",
                  replicas, everywhere ? "all" : "one", us, blocks.size(), sink < 0 ? "!" : "");
    }
  }
}
