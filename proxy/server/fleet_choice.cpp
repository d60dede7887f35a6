#include "server/fleet_choice.hpp"

#include <algorithm>
#include <functional>

#include "fleet/picker.hpp"
#include "fleet/prefix_index.hpp"
#include "fleet/prefix_key.hpp"
#include "server/worker.hpp"

namespace tokengate {

namespace {

request_error context_too_long(const config::config& cfg, const config::route& route,
                               long long tokens) {
  long long largest = 0;
  for (const auto& t : route.targets)
    largest = std::max(largest, cfg.upstreams.at(t.upstream).capacity.max_context_tokens);
  return request_error::client(
      400, "context_length_exceeded",
      "this request needs about " + std::to_string(tokens) +
          " tokens (prompt bytes / 4 plus the output limit); the largest context among the "
          "targets of route '" +
          route.name + "' is " + std::to_string(largest) +
          " tokens: shorten the prompt or lower max_tokens");
}

// balance: fastest. Each target's predicted time to first token: the
// requests ahead of this one for its slots, then what is left of the
// prefill in flight there and the prompt tokens its cache is not
// predicted to hold, at its learned rates.
void predict(fleet::target_state& state, fleet::candidate& c, const config::upstream& u,
             std::span<const std::uint64_t> blocks, long long prompt_tokens, bool queued) {
  auto& load = *c.load;
  load.size_index(u.capacity.kv_tokens);
  load.max_streams.store(u.capacity.max_streams, std::memory_order_relaxed);
  const auto match = load.index.longest_match(blocks);
  c.matched_tokens =
      std::min(prompt_tokens, static_cast<long long>(match.held) *
                                  static_cast<long long>(fleet::prefix_block_tokens));
  c.uncached_tokens = prompt_tokens - c.matched_tokens;
  c.prefill_tokens = c.uncached_tokens;
  c.ahead = c.max_streams > 0 ? std::max(0, state.busy - c.max_streams + 1) : 0;
  c.prefill_ahead = std::llround(load.prefill_left(load.ttft.prefill_tokens_per_second()));
  // (another request's prefill is bringing part of the match: wait for it)
  if (match.ready < match.held && queued) c.waits_for_block = blocks[match.ready];
  c.predicted_s =
      load.ttft.predict(static_cast<double>(c.uncached_tokens + c.prefill_ahead), c.ahead);
  state.predicted_s = c.predicted_s;
}

}  // namespace

std::variant<fleet_choice, request_error> choose_targets(worker& w, const config::config& cfg,
                                                         const routing::routed_request& routed,
                                                         std::string_view body,
                                                         std::size_t body_bytes) {
  const auto& route = *routed.route;
  fleet_choice choice;
  const auto prompt_tokens = routing::prompt_tokens_estimate(std::max(body_bytes, body.size()));
  choice.tokens = prompt_tokens + routed.output_limit.value_or(0);
  const auto now = upstream::health_table::clock::now();
  std::vector<fleet::target_state> states;
  std::vector<fleet::candidate> candidates;
  for (const auto& t : route.targets) {
    const auto& u = cfg.upstreams.at(t.upstream);
    if (u.capacity.max_context_tokens && choice.tokens > u.capacity.max_context_tokens) continue;
    auto& load = w.fleet().load_of(t.upstream);
    const bool healthy = load.probed_healthy.load(std::memory_order_relaxed) &&
                         !w.upstreams().health().ejected(t.upstream, now);
    states.push_back({&t, healthy, load.busy(), load.tokens.load(std::memory_order_relaxed),
                      u.capacity.max_streams, std::hash<std::string>{}(t.upstream)});
    candidates.push_back(
        {&load, u.capacity.max_streams, healthy, u.capacity.max_prefill_tokens, prompt_tokens});
  }
  if (states.empty()) return context_too_long(cfg, route, choice.tokens);
  if (route.balance == config::balance_mode::fastest) {
    auto blocks =
        std::make_shared<std::vector<std::uint64_t>>(fleet::prompt_blocks(body, routed.scan));
    for (std::size_t i = 0; i < states.size(); ++i)
      predict(states[i], candidates[i], cfg.upstreams.at(states[i].target->upstream), *blocks,
              prompt_tokens, route.queue.has_value());
    choice.blocks = std::move(blocks);
  }
  std::optional<std::uint64_t> conversation;
  if (route.affinity)
    conversation = fleet::conversation_key(body, routed.scan, route.affinity->prefix_bytes);
  const bool hold = route.affinity && route.queue && route.affinity->hold.count() > 0;
  auto pick = fleet::pick_order(route, states, conversation, w.upstreams().rng(), hold);
  choice.first_is_home = hold && pick.by_affinity;
  if (hold)
    choice.home_hold = std::chrono::duration_cast<std::chrono::milliseconds>(route.affinity->hold);
  if (route.balance == config::balance_mode::fastest && route.queue && !pick.order.empty()) {
    // The fastest may be a full replica worth waiting for (it holds the
    // prompt): for as long as its predicted wait, then anywhere. Or one
    // whose cache is still taking the prompt's beginning in (another
    // request's prefill): for half as long again as its prediction.
    const auto& first = candidates[pick.order.front()];
    const double wait = first.waits_for_block ? 1.5 * first.predicted_s + 0.05
                        : first.ahead > 0     ? first.load->ttft.wait_seconds(first.ahead)
                                              : 0;
    if (wait > 0) {
      choice.first_is_home = true;
      choice.home_hold = std::chrono::milliseconds(static_cast<long long>(1000 * wait) + 1);
    }
  }
  if (route.affinity) w.fleet().note_pick(route.name, pick.by_affinity, pick.spilled);
  choice.order.reserve(pick.order.size());
  for (auto i : pick.order) choice.order.push_back({states[i].target, candidates[i]});
  return choice;
}

fleet::admission_request admission_for(const routing::routed_request& routed,
                                       const fleet_choice& choice) {
  fleet::admission_request r;
  r.route = routed.route->name;
  r.tokens = choice.tokens;
  r.priority = routed.key ? routed.key->priority : 1;
  r.queue = routed.route->queue;
  if (choice.first_is_home) r.home_hold = choice.home_hold;
  r.blocks = choice.blocks;
  r.candidates.reserve(choice.order.size());
  for (const auto& o : choice.order) r.candidates.push_back(o.admission);
  return r;
}

error_extras refusal_extras(const request_error& r, std::string_view path) {
  error_extras extras;
  extras.headers.emplace_back("retry-after", std::to_string(r.retry_after_s));
  if (path == "/v1/messages")
    extras.anthropic_type = r.status == 429 ? "rate_limit_error" : "overloaded_error";
  return extras;
}

void put_first(upstream::exchange_plan& plan, std::size_t index) {
  if (index == 0) return;
  auto first = static_cast<std::ptrdiff_t>(index);
  std::rotate(plan.upstreams.begin(), plan.upstreams.begin() + first,
              plan.upstreams.begin() + first + 1);
  std::rotate(plan.edits.begin(), plan.edits.begin() + first, plan.edits.begin() + first + 1);
  std::rotate(plan.translations.begin(), plan.translations.begin() + first,
              plan.translations.begin() + first + 1);
  std::rotate(plan.models.begin(), plan.models.begin() + first, plan.models.begin() + first + 1);
  plan.first_connection.reset();  // (opened to the target that was first)
}

bool fleet_decides(const config::config& cfg, const config::route& route) {
  if (route.affinity || route.queue) return true;
  for (const auto& t : route.targets)
    if (cfg.upstreams.at(t.upstream).capacity.bounds_admission()) return true;
  return false;
}

}  // namespace tokengate
