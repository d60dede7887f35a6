#pragma once
// A routed request's targets in the order to try them (fleet/picker.hpp),
// each with what admission needs of it (fleet/board.hpp): its shared load,
// its capacity and its health as this worker sees it. Targets whose
// context cannot hold the request are left out; when none can, the
// request is refused with context_length_exceeded.
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.hpp"
#include "fleet/board.hpp"
#include "http/json_response.hpp"
#include "http/request_error.hpp"
#include "routing/policy.hpp"
#include "upstream/exchange.hpp"

namespace tokengate {

class worker;

struct ordered_target {
  const config::route_target* target = nullptr;
  fleet::candidate admission;
};

struct fleet_choice {
  std::vector<ordered_target> order;
  long long tokens = 0;        // the request's estimate: prompt bytes / 4 + output limit
  bool first_is_home = false;  // chosen by the conversation, and worth waiting for
  std::chrono::milliseconds home_hold{0};                    // … for this long
  std::shared_ptr<const std::vector<std::uint64_t>> blocks;  // balance: fastest
};

// `body` may be only the body's start (a decision made while it arrives):
// then `body_bytes` is the whole body's length.
std::variant<fleet_choice, request_error> choose_targets(worker& w, const config::config& cfg,
                                                         const routing::routed_request& routed,
                                                         std::string_view body,
                                                         std::size_t body_bytes);

// What the board is asked for the targets kept (after fallback limits).
fleet::admission_request admission_for(const routing::routed_request& routed,
                                       const fleet_choice& choice);

// What the fleet's refusal adds as the client gets it: its Retry-After
// (and Anthropic's error shape on /v1/messages).
error_extras refusal_extras(const request_error& r, std::string_view path);

// The admitted target first in the plan; a connection opened early to
// another one is dropped.
void put_first(upstream::exchange_plan& plan, std::size_t index);

// Whether the route's requests may need to wait for capacity or follow a
// conversation: then its body is not sent before the whole of it is read.
bool fleet_decides(const config::config& cfg, const config::route& route);

}  // namespace tokengate
