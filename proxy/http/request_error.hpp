#pragma once
// The one error type of a request that does not end well: who is at fault
// (the side), the HTTP status the client gets, the OpenAI error type and
// code of its JSON body, the message, and whether trying again (another
// target, or the client a little later) may succeed. Every refusal and
// failure tokengate answers or records is one of these; the access log
// and tokengate_request_errors_total label by its side and code.
#include <cstdint>
#include <string>
#include <string_view>

namespace tokengate {

enum class error_side : std::uint8_t {
  client,    // the request itself: malformed, too large, too slow; or the client went away
  policy,    // refused by the YAML policy: unknown model, key, limits
  upstream,  // the engine or provider: unreachable, timed out, failed, overloaded
  internal,  // tokengate itself
};

std::string_view side_name(error_side side);

struct request_error {
  error_side side = error_side::internal;
  unsigned status = 500;
  // Both name one of a fixed set of words (string literals), so a metric
  // may label by them.
  std::string_view type;  // OpenAI error type, e.g. invalid_request_error
  std::string_view code;  // e.g. model_not_found
  std::string message;
  bool retryable = false;
  int retry_after_s = 0;  // > 0: when the client may come back (its Retry-After)

  // A malformed or oversized request: invalid_request_error.
  static request_error client(unsigned status, std::string_view code, std::string message) {
    return {error_side::client, status, "invalid_request_error", code, std::move(message), false};
  }
  static request_error policy(unsigned status, std::string_view type, std::string_view code,
                              std::string message) {
    return {error_side::policy, status, type, code, std::move(message), false};
  }
  // The client went away before its answer was complete (nginx's 499).
  static request_error disconnected() {
    return {error_side::client,    499,  "client_closed_request", "client_disconnected",
            "client disconnected", false};
  }
  // Retryable unless the upstream's answer says otherwise.
  static request_error upstream(unsigned status, std::string_view code, std::string message,
                                bool retryable = true) {
    return {error_side::upstream, status, "upstream_error", code, std::move(message), retryable};
  }
};

}  // namespace tokengate
