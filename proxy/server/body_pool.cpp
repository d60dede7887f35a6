#include "server/body_pool.hpp"

namespace tokengate {

body_bytes body_pool::take(std::size_t length) {
  body_bytes body;
  if (length >= kept_from) {
    if (auto fit = kept_.lower_bound(length); fit != kept_.end()) {
      body = std::move(fit->second.bytes);
      kept_bytes_ -= fit->first;
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
  kept_bytes_ += capacity;
  kept_.emplace(capacity, kept_buffer{std::move(body), now});
}

void body_pool::release_unused(clock::time_point now) {
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (now - it->second.since < kept_for_) {
      ++it;
      continue;
    }
    kept_bytes_ -= it->first;
    it = kept_.erase(it);
  }
}

}  // namespace tokengate
