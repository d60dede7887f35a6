#include "upstream/retry_policy.hpp"

#include <algorithm>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <charconv>
#include <ctime>

#include "upstream/health.hpp"

namespace tokengate::upstream {

std::string_view reason_name(attempt_failure f) {
  switch (f) {
    case attempt_failure::rate_limited:
      return "rate_limited";
    case attempt_failure::server_error:
      return "server_error";
    case attempt_failure::reset:
      return "reset";
    case attempt_failure::timeout:
      return "timeout";
    case attempt_failure::refused:
      return "refused";
    case attempt_failure::invalid:
      return "invalid_answer";
    case attempt_failure::context_too_long:
      return "context_length";
  }
  return "other";
}

attempt_failure head_failure_kind(const error_code& ec) {
  if (ec == beast::error::timeout) return attempt_failure::timeout;
  if (ec == net::error::eof || ec == net::error::connection_reset ||
      ec == net::error::connection_aborted || ec == net::error::broken_pipe ||
      ec == http::error::end_of_stream || ec == http::error::partial_message)
    return attempt_failure::reset;
  return attempt_failure::invalid;
}

std::optional<std::chrono::milliseconds> parse_retry_after(
    std::string_view value, std::chrono::system_clock::time_point now) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  long long seconds = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec == std::errc{} && end == value.data() + value.size())
    return seconds < 0 ? std::nullopt
                       : std::optional(std::chrono::milliseconds(
                             std::min<long long>(seconds, 86'400) * 1000));
  // An HTTP date: "Sun, 06 Nov 1994 08:49:37 GMT".
  std::tm tm{};
  std::string text(value);
  if (!strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm)) return std::nullopt;
  auto at = std::chrono::system_clock::from_time_t(timegm(&tm));
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(at - now);
  return std::max(wait, std::chrono::milliseconds(0));
}

bool says_context_too_long(std::string_view body) {
  static constexpr std::string_view spellings[] = {
      "context_length_exceeded",    // OpenAI, and the compatible APIs that copy its codes
      "prompt is too long",         // Anthropic
      "maximum context length",     // vLLM, SGLang, OpenAI's message
      "exceed_context_size",        // llama.cpp's server
      "exceeds the context",        // llama.cpp, Ollama
      "max_new_tokens` must be <="  // TGI
  };
  return std::any_of(std::begin(spellings), std::end(spellings),
                     [&](std::string_view s) { return body.find(s) != std::string_view::npos; });
}

bool retry_budget::take(const std::string& upstream, const config::retry_settings& s,
                        clock::time_point now) {
  auto& w = windows_[upstream];
  if (now - w.start >= s.per_target_window) w = {now, 0};
  if (w.used >= s.per_target) return false;
  ++w.used;
  return true;
}

std::optional<std::chrono::milliseconds> retry_same_target(
    attempt_failure failure, int tries, std::optional<std::chrono::milliseconds> retry_after,
    const config::retry_settings& settings, std::chrono::milliseconds backoff_base,
    std::mt19937_64& rng) {
  const int retries_so_far = tries - 1;
  switch (failure) {
    case attempt_failure::rate_limited:
      if (retries_so_far >= settings.rate_limited) return std::nullopt;
      if (retry_after) {
        if (*retry_after > settings.retry_after_cap) return std::nullopt;
        return *retry_after;
      }
      // No Retry-After: backoff from at least 100 ms, the quickest a rate
      // limit usually lifts.
      return backoff_for(tries, std::max(backoff_base, std::chrono::milliseconds(100)), rng);
    case attempt_failure::server_error:
    case attempt_failure::reset:
      if (retries_so_far >= settings.same_target) return std::nullopt;
      return backoff_for(tries, backoff_base, rng);
    case attempt_failure::timeout:
    case attempt_failure::refused:
    case attempt_failure::invalid:
    case attempt_failure::context_too_long:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace tokengate::upstream
