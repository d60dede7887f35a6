#include "server/body_pool.hpp"

namespace tokengate {

body_bytes body_pool::take(std::size_t length) {
  body_bytes body;
  if (length >= kept_from) {
    if (auto fit = kept_.lower_bound(length); fit != kept_.end()) {
      body = std::move(fit->second.bytes);
      kept_bytes_sub(fit->first);
      kept_.erase(fit);
    }
  }
  body.resize(length);
  return body;
}

void body_pool::give_back(body_bytes&& body, clock::time_point now) {
  const auto capacity = body.capacity();
  if (capacity < kept_from) return;
  // (A full pool keeps what it has: the buffers it holds are as warm.)
  if (kept_bytes_ + capacity > max_bytes_) return;
  body.clear();
  kept_bytes_add(capacity);
  kept_.emplace(capacity, kept_buffer{std::move(body), now});
}

void body_pool::release_unused(clock::time_point now) {
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (now - it->second.since < kept_for_) {
      ++it;
      continue;
    }
    kept_bytes_sub(it->first);
    it = kept_.erase(it);
  }
}

void body_pool::kept_bytes_add(std::size_t n) {
  kept_bytes_ += n;
  if (gauge_) gauge_->add(n);
}

void body_pool::kept_bytes_sub(std::size_t n) {
  kept_bytes_ -= n;
  if (gauge_) gauge_->sub(n);
}

}  // namespace tokengate
