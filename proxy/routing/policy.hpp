#pragma once
// The YAML policy applied to one request, before any upstream is chosen:
// find the route by path + model, authenticate the client key, decide the
// output-token limit. Then, per target tried, produce the body to send (the
// model renamed, the limit in the spelling that upstream honours) by
// splicing the original bytes.
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.hpp"
#include "config/glob.hpp"
#include "http/request_error.hpp"
#include "routing/json_scan.hpp"
#include "scan/sha256.hpp"

namespace tokengate::routing {

using config::glob_match;

// A prompt's tokens as the policy, budgets and the fleet estimate them
// before any tokenizer has seen it: its body's bytes / 4.
inline long long prompt_tokens_estimate(std::size_t body_bytes) {
  return static_cast<long long>(body_bytes / 4);
}

// Lower-case hex SHA-256, as stored in `keys[].sha256`.
using tokengate::sha256_hex;

struct request_view {
  std::string_view path;
  std::string_view body;
  std::string_view client_key;  // from Authorization: Bearer … or x-api-key; empty if none
  // The whole body's length when `body` is only its start (a long body
  // forwarded while it arrives, server/early_forward.hpp); 0 otherwise.
  std::size_t body_bytes = 0;
};

struct routed_request {
  const config::route* route = nullptr;
  const config::client_key* key = nullptr;
  std::string model;                 // as the client named it
  std::string_view matched_pattern;  // the route's `models` entry that matched
  bool stream = false;
  bool client_asked_usage = false;           // stream_options.include_usage was true
  std::optional<long long> requested_limit;  // what the client asked for
  std::optional<long long> output_limit;     // what will be sent and enforced
  bool limit_injected = false;
  bool limit_clamped = false;
  scanned_object scan;  // top-level members of the body
};

std::variant<routed_request, request_error> apply_policy(const config::config& cfg,
                                                         const request_view& request);

// Whether apply_policy or edits_for_target read the top-level member `key`.
// A decision made on the start of a body holds for the whole body when
// none of the members after that start is one of these.
bool policy_reads(std::string_view key);

// Whether the stream's usage must be asked for on the client's behalf (the
// accounting needs it; the client did not ask).
bool usage_needed(const routed_request& request, std::string_view path);

// The client key from the request headers' values.
std::string_view client_key_from(std::string_view authorization, std::string_view x_api_key);

// The changes the body needs for one target, in order of position: the
// relay sends the original bytes around them (no copy of a long prompt).
// `ask_usage` adds stream_options.include_usage (so that accounting has
// usage even when the client did not ask).
std::vector<splice> edits_for_target(std::string_view body, std::string_view path,
                                     const routed_request& request,
                                     const config::route_target& target,
                                     const config::upstream& upstream, bool ask_usage);
// The same changes applied: the body as the target receives it.
std::string body_for_target(std::string_view body, std::string_view path,
                            const routed_request& request, const config::route_target& target,
                            const config::upstream& upstream, bool ask_usage);

// GET /v1/models as the policy exposes them (exact names and aliases, not
// globs), filtered by what the key may use.
std::string models_list_json(const config::config& cfg, const config::client_key* key);

// Authenticates a request that carries no model (GET /v1/models).
std::variant<const config::client_key*, request_error> authenticate(const config::config& cfg,
                                                                    std::string_view client_key);

}  // namespace tokengate::routing
