#pragma once
// How an attempt that failed before anything reached the client is
// judged, the way a careful client judges it:
//
// | what failed                               | then                                   |
// |-------------------------------------------|----------------------------------------|
// | 429                                       | the same target again, after its       |
// |                                           | Retry-After (capped) or a jittered     |
// |                                           | backoff, `retry.rate_limited` times    |
// | 5xx, the connection reset before the head | the same target once more              |
// |                                           | (`retry.same_target`), then the next   |
// | a timeout: connect, first byte            | the next target at once: a silent      |
// |                                           | target stays silent                    |
// | a connection refused, a head that breaks   | the next target at once                |
// | the protocol                              |                                        |
// | a 400 saying the prompt is too long       | the next target that declares a larger |
// |                                           | context, else that 400 to the client   |
// | any other 4xx (a policy refusal, …)       | to the client as it is                 |
//
// Same-target retries are bounded per worker and upstream
// (`retry.per_target` per window): a target failing for everyone is not
// sent each request's retries too; past the bound a failure moves on.
#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "io/net.hpp"

namespace tokengate::upstream {

enum class attempt_failure {
  rate_limited,
  server_error,
  reset,  // the connection ended or was reset before a whole head
  timeout,
  refused,
  invalid,  // a head that breaks the protocol: the same target would send it again
  context_too_long
};

// What an error before the head was: a reset (the network, or a closed
// connection), a timeout, or an answer that is not valid HTTP.
attempt_failure head_failure_kind(const error_code& ec);

// The failure as the retry metric's `reason` label names it.
std::string_view reason_name(attempt_failure f);

// Retry-After as delay-seconds or an HTTP date (RFC 9110 §10.2.3); nullopt
// when absent or unreadable.
std::optional<std::chrono::milliseconds> parse_retry_after(
    std::string_view value, std::chrono::system_clock::time_point now);

// Whether an error answer says the prompt does not fit the model's context,
// in any provider's or engine's words (OpenAI's context_length_exceeded,
// Anthropic's "prompt is too long", vLLM's "maximum context length",
// llama.cpp's exceed_context_size_error, TGI's "must be <= ").
bool says_context_too_long(std::string_view body);

// This worker's same-target retries per upstream, in fixed windows.
class retry_budget {
 public:
  using clock = std::chrono::steady_clock;
  // Takes one retry for `upstream` when the window has one left.
  bool take(const std::string& upstream, const config::retry_settings& s, clock::time_point now);

 private:
  struct window {
    clock::time_point start;
    int used = 0;
  };
  std::map<std::string, window, std::less<>> windows_;
};

// After a failure on a target that has had `tries` attempts so far: the
// wait before trying it again, or nullopt to move on.
std::optional<std::chrono::milliseconds> retry_same_target(
    attempt_failure failure, int tries, std::optional<std::chrono::milliseconds> retry_after,
    const config::retry_settings& settings, std::chrono::milliseconds backoff_base,
    std::mt19937_64& rng);

}  // namespace tokengate::upstream
