#include "server/target_order.hpp"

#include <algorithm>

#include "server/early_forward.hpp"
#include "translate/translation.hpp"

namespace tokengate {

namespace {

// The targets that can take a request in the client's API (each serves
// it, or it can be translated for them); when none can, why (naming the
// first one's upstream).
std::optional<request_error> keep_able_targets(const config::config& cfg, fleet_choice& choice,
                                               dialect client, std::string_view path) {
  const config::upstream* refused = nullptr;
  std::erase_if(choice.order, [&](const ordered_target& o) {
    const auto& u = cfg.upstreams.at(o.target->upstream);
    if (translate::answer_dialect(client, u)) return false;
    if (!refused) refused = &u;
    return true;
  });
  if (!choice.order.empty()) return std::nullopt;
  if (refused) return translate::unsupported_api(*refused, path);
  return request_error::client(400, "unsupported_api",
                               "no target of this route can take " + std::string(path));
}

// The early target goes first; not in the order (taken out of rotation
// meanwhile), or a decision that disagrees: the caller abandons it.
bool put_early_first(std::vector<ordered_target>& order, const routing::routed_request& routed,
                     std::string_view path, const early_forward* early) {
  if (!early || !early->agrees_with(routed, path)) return false;
  auto sent = std::find_if(order.begin(), order.end(),
                           [&](const auto& o) { return o.target == early->target; });
  if (sent == order.end()) return false;
  std::rotate(order.begin(), sent, sent + 1);
  return true;
}

// A route's `retries`: that many fallbacks after the first target, no more.
void cut_to_retries(std::vector<ordered_target>& order, const config::route& route) {
  if (route.retries >= 0 && order.size() > static_cast<std::size_t>(route.retries) + 1)
    order.resize(static_cast<std::size_t>(route.retries) + 1);
}

}  // namespace

std::variant<ordered_targets, request_error> order_targets(worker& w, const config::config& cfg,
                                                           const routing::routed_request& routed,
                                                           std::string_view body,
                                                           const request_context& ctx,
                                                           const early_forward* early) {
  auto chosen = choose_targets(w, cfg, routed, body, 0);
  if (auto* e = std::get_if<request_error>(&chosen)) return std::move(*e);
  ordered_targets targets{std::move(std::get<fleet_choice>(chosen))};
  if (auto e = keep_able_targets(cfg, targets.choice, ctx.dialect, ctx.path)) return std::move(*e);
  targets.takes_early = put_early_first(targets.choice.order, routed, ctx.path, early);
  cut_to_retries(targets.choice.order, *routed.route);
  return targets;
}

}  // namespace tokengate
