#pragma once
// The order in which a request tries a route's targets. Healthy targets
// come first (passively healthy on this worker, and passing their active
// check), the first of them chosen by the route's `balance`:
//   least_loaded: two targets drawn by weight, the one with fewer
//     in-flight tokens per unit of weight (power of two choices: close to
//     the least loaded without every instance herding onto the same one);
//   weighted_random: one drawn by weight;
//   fastest: every healthy target by its predicted time to first token
//     (fleet/ttft_model.hpp), the fastest first.
// With `affinity`, a conversation's key (prefix_key.hpp) picks first by
// rendezvous hashing: every instance ranks the targets the same way for
// the same conversation, and a target that leaves moves only its own
// conversations. The top-ranked target is skipped while it carries more
// than max_load_ratio times its share of the route's streams, plus one
// (bounded load), or has no free slot while another has.
// The other healthy targets follow (least_loaded: least loaded first;
// weighted_random: in the route's order); then the ejected
// ones, in the route's order (better a likely failure than a certain one).
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "config/config.hpp"

namespace tokengate::fleet {

struct target_state {
  const config::route_target* target = nullptr;
  bool healthy = true;
  int busy = 0;                 // streams in flight (upstream_load::busy)
  long long tokens = 0;         // tokens in flight
  int max_streams = 0;          // capacity; 0 = no bound
  std::uint64_t name_hash = 0;  // of the upstream's name, for rendezvous hashing
  double predicted_s = 0;       // balance: fastest: its predicted time to first token
};

struct pick {
  std::vector<std::size_t> order;  // indices into the states given
  bool by_affinity = false;        // the first is the conversation's own
  bool spilled = false;            // … or would have been, but it was overloaded
};

// `wait_for_home`: a full conversation's replica stays first (the request
// will wait for its slot, affinity.hold); only overload moves it.
pick pick_order(const config::route& route, std::span<const target_state> targets,
                std::optional<std::uint64_t> conversation, std::mt19937_64& rng,
                bool wait_for_home = false);

}  // namespace tokengate::fleet
