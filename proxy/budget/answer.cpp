#include "budget/answer.hpp"

#include <algorithm>
#include <cstdio>

namespace tokengate::budget {
namespace {

bool counts_tokens(limit_kind k) {
  return k == limit_kind::tokens_per_minute || k == limit_kind::tokens_per_day;
}

// The counter of the kinds `pick` accepts with the least left; -1 if none.
template <typename Pick>
int tightest(const demand& d, const reservation& r, Pick pick) {
  int best = -1;
  long long best_left = 0;
  for (std::size_t i = 0; i < d.counters.size() && i < r.states.size(); ++i) {
    if (!pick(d.counters[i].kind)) continue;
    long long left = d.counters[i].limit - r.states[i].used;
    if (best < 0 || left < best_left) {
      best = static_cast<int>(i);
      best_left = left;
    }
  }
  return best;
}

void add_headers(header_list& out, const char* what, const demand& d, const reservation& r, int i) {
  if (i < 0) return;
  const auto& c = d.counters[i];
  auto left = std::max(0LL, c.limit - r.states[i].used);
  out.emplace_back(std::string("x-ratelimit-limit-") + what, std::to_string(c.limit));
  out.emplace_back(std::string("x-ratelimit-remaining-") + what, std::to_string(left));
  out.emplace_back(std::string("x-ratelimit-reset-") + what, reset_text(r.states[i].reset_ms));
}

std::string amount_text(limit_kind kind, long long amount) {
  if (kind != limit_kind::usd_per_day && kind != limit_kind::usd_per_month)
    return std::to_string(amount);
  char text[64];
  std::snprintf(text, sizeof text, "$%.4f", static_cast<double>(amount) / micro_usd_per_usd);
  return text;
}

}  // namespace

std::string reset_text(std::int64_t ms) {
  if (ms < 0) ms = 0;
  if (ms < 1000) return std::to_string(ms) + "ms";
  auto h = ms / 3'600'000, m = ms / 60'000 % 60;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", static_cast<double>(ms % 60'000) / 1000.0);
  std::string out;
  if (h) out += std::to_string(h) + "h";
  if (h || m) out += std::to_string(m) + "m";
  return out + seconds + "s";
}

header_list rate_limit_headers(const demand& d, const reservation& r) {
  header_list out;
  add_headers(out, "requests", d, r,
              tightest(d, r, [](limit_kind k) { return k == limit_kind::requests_per_minute; }));
  add_headers(out, "tokens", d, r, tightest(d, r, counts_tokens));
  return out;
}

request_error refusal(const demand& d, const reservation& r) {
  const auto& c = d.counters[r.refused_at];
  const auto used = r.states[r.refused_at].used;
  std::string message = "budget exceeded for " + c.scope + " on " + std::string(kind_name(c.kind)) +
                        ": limit " + amount_text(c.kind, c.limit) + ", used " +
                        amount_text(c.kind, used) + ", this request needs " +
                        amount_text(c.kind, c.amount);
  if (c.amount > c.limit)
    message += " (more than the whole limit: lower max_tokens or the prompt)";
  else
    message += "; try again in " + retry_after(d, r) + "s";
  const bool spend = c.kind == limit_kind::usd_per_day || c.kind == limit_kind::usd_per_month;
  std::string_view type = spend                   ? "insufficient_quota"
                          : counts_tokens(c.kind) ? "tokens"
                                                  : "requests";
  return request_error::policy(429, type, spend ? "insufficient_quota" : "rate_limit_exceeded",
                               std::move(message));
}

std::string retry_after(const demand& d, const reservation& r) {
  if (d.counters[r.refused_at].kind == limit_kind::concurrent_streams) return "1";
  auto ms = std::max<std::int64_t>(r.states[r.refused_at].reset_ms, 1);
  return std::to_string((ms + 999) / 1000);
}

request_error store_unavailable() {
  auto e = request_error::policy(503, "api_error", "budget_store_unavailable",
                                 "the budget store does not answer and this gateway denies "
                                 "requests it cannot count (redis.on_store_failure: deny)");
  e.retryable = true;
  return e;
}

}  // namespace tokengate::budget
