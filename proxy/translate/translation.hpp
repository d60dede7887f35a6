#pragma once
// Where a route's target does not serve the client's API (its upstream's
// `apis:`, or what its `kind` means), the request is translated for it
// and its answer back: OpenAI chat completions ↔ Anthropic messages,
// OpenAI Responses ↔ chat completions, and Responses ↔ Anthropic messages
// (the request through chat, in two steps; the answer directly). This file
// decides it per target, and makes the pieces the exchange and the relay
// use.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.hpp"
#include "http/dialect.hpp"
#include "http/request_error.hpp"
#include "routing/policy.hpp"
#include "stream/answer_translator.hpp"
#include "upstream/exchange.hpp"

namespace tokengate::translate {

// The dialect `upstream` answers a `client` request in: the client's own
// when it serves that API, else the one the request is translated to;
// nothing when it cannot take the request at all (OpenAI's completions
// anywhere but where it is served).
std::optional<dialect> answer_dialect(dialect client, const config::upstream& upstream);

// Whether a request in `client` dialect goes to `upstream` as it is.
bool sent_as_is(dialect client, const config::upstream& upstream);

// The 400 unsupported_api for a request on `path` that `upstream` cannot take.
request_error unsupported_api(const config::upstream& upstream, std::string_view path);

// One target's request: the policy's edits, or the whole body translated
// (one edit replacing it) and where it goes; or why the target cannot
// take it.
struct target_request {
  std::vector<upstream::splice> edits;
  std::optional<upstream::translated_attempt> translation;
};
std::variant<target_request, request_error> request_for_target(
    std::string_view body, dialect client, std::string_view path,
    const routing::routed_request& routed, const config::route_target& target,
    const config::upstream& upstream, bool ask_usage);

// The translator of an answer in `upstream_dialect` for a client in
// `client_dialect`. `model`: the name the client asked for.
std::unique_ptr<stream::answer_translator> answer_translator_for(dialect client_dialect,
                                                                 dialect upstream_dialect,
                                                                 bool usage_asked,
                                                                 std::string model);

}  // namespace tokengate::translate
