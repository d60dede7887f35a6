#include "upstream/worker_upstreams.hpp"

#include <stdexcept>

#include "io/tls_context.hpp"
#include "upstream/tls_resumption.hpp"

namespace tokengate::upstream {

// What makes a pool: a reload that changes any of these gets a new one.
// (Spelled into a string kept for it: pool_for is called for every
// request, and a fresh string would be two allocations each time.)
const std::string& worker_upstreams::identity_of(const config::upstream& settings) {
  return pool_identity_.assign(settings.name)
      .append(1, '|')
      .append(settings.base_url)
      .append(1, '|')
      .append(settings.ca_file);
}

pool& worker_upstreams::pool_for(const config::upstream& settings) {
  // Pools are never destroyed while the worker runs: a connection in use
  // goes back to the pool it came from even if a reload replaced it.
  identity_of(settings);
  if (auto found = pools_.find(pool_identity_); found != pools_.end() && found->second)
    return *found->second;
  auto& slot = pools_[pool_identity_];
  if (!slot) {
    auto url = parse_target_url(settings.base_url);
    if (!url)
      throw std::runtime_error("upstream " + settings.name + ": invalid base_url " +
                               settings.base_url);
    std::shared_ptr<net::ssl::context> tls;
    if (url->tls) {
      auto& ctx = tls_by_ca_[settings.ca_file];
      if (!ctx) {
        ctx = make_client_tls_context(settings.ca_file);
        enable_resumption(ctx->native_handle());  // (this worker's context: see tls_resumption.hpp)
      }
      tls = ctx;
    }
    slot = std::make_unique<pool>(executor_, settings, *url, tls, &metrics_);
  }
  return *slot;
}

void worker_upstreams::adopt_settings(const config::config& next) {
  std::map<std::string, const config::upstream*> by_identity;
  for (const auto& [name, settings] : next.upstreams)
    by_identity.emplace(identity_of(settings), &settings);
  for (auto& [identity, p] : pools_) {
    if (!p) continue;
    if (auto found = by_identity.find(identity); found != by_identity.end())
      p->adopt(*found->second);
    else
      p->retire();
  }
}

void worker_upstreams::close_stale_connections() {
  auto now = std::chrono::steady_clock::now();
  for (auto& [identity, p] : pools_)
    if (p) p->close_stale(now);
}

}  // namespace tokengate::upstream
