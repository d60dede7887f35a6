#include "fleet/ttft_model.hpp"

#include <algorithm>

namespace tokengate::fleet {
namespace {

constexpr double prior_base = 0.05;             // seconds
constexpr double prior_per_token = 1.0 / 5000;  // seconds a prompt token
constexpr double prior_weight = 3;              // observations the prior is worth

}  // namespace

void ttft_model::observe_prefill(double prefill_tokens, double seconds) {
  std::lock_guard guard(lock_);
  const double x = std::max(0.0, prefill_tokens), y = std::max(0.0, seconds);
  w_ = keep * w_ + 1;
  sx_ = keep * sx_ + x;
  sy_ = keep * sy_ + y;
  sxx_ = keep * sxx_ + x * x;
  sxy_ = keep * sxy_ + x * y;
}

void ttft_model::observe_end(clock::time_point at) {
  std::lock_guard guard(lock_);
  if (last_end_ != clock::time_point{} && at > last_end_) {
    const double gap = std::chrono::duration<double>(at - last_end_).count();
    gap_seconds_ = keep * gap_seconds_ + (1 - keep) * gap;
  }
  last_end_ = std::max(last_end_, at);
}

// Least squares blended with the prior: with few observations the prior
// holds; with ones all of about one length (no spread to find a slope
// in) its rate does.
ttft_model::fit ttft_model::line() const {
  // The prior as observations at 0 and 4,000 tokens, worth less and less
  // as real ones come.
  const double pw = prior_weight / (1 + w_);
  const double w = w_ + pw;
  const double px = 2000, pxx = 8e6;
  const double sx = sx_ + pw * px;
  const double sy = sy_ + pw * (prior_base + prior_per_token * px);
  const double sxx = sxx_ + pw * pxx;
  const double sxy = sxy_ + pw * (prior_base * px + prior_per_token * pxx);
  const double var = sxx / w - (sx / w) * (sx / w);
  const double cov = sxy / w - (sx / w) * (sy / w);
  double per_token = var > 1e-9 ? cov / var : prior_per_token;
  per_token = std::clamp(per_token, 1e-7, 1e-1);
  const double base = std::max(0.0, sy / w - per_token * sx / w);
  return {base, per_token};
}

double ttft_model::predict(double prefill_tokens, int ahead) const {
  std::lock_guard guard(lock_);
  auto [base, per_token] = line();
  return waited(ahead) + base + per_token * std::max(0.0, prefill_tokens);
}

double ttft_model::wait_seconds(int ahead) const {
  std::lock_guard guard(lock_);
  return waited(ahead);
}

double ttft_model::prefill_tokens_per_second() const {
  std::lock_guard guard(lock_);
  return 1 / line().per_token;
}

double ttft_model::slots_per_second() const {
  std::lock_guard guard(lock_);
  return 1 / gap_seconds_;
}

double ttft_model::base_seconds() const {
  std::lock_guard guard(lock_);
  return line().base;
}

}  // namespace tokengate::fleet
