#include "server/connection_gate.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <string_view>

namespace tokengate {

connection_ticket& connection_ticket::operator=(connection_ticket&& other) noexcept {
  if (this != &other) {
    release();
    gate_ = std::exchange(other.gate_, nullptr);
    client_ = other.client_;
    counted_for_client_ = std::exchange(other.counted_for_client_, false);
    within_client_limit_ = other.within_client_limit_;
  }
  return *this;
}

void connection_ticket::release() {
  if (!gate_) return;
  if (counted_for_client_) {
    std::lock_guard lock(gate_->per_client_mutex_);
    auto it = gate_->per_client_.find(client_);
    if (it != gate_->per_client_.end() && --it->second == 0) gate_->per_client_.erase(it);
  }
  gate_->open_.fetch_sub(1, std::memory_order_relaxed);
  gate_ = nullptr;
}

std::size_t connection_gate::address_hash::operator()(
    const std::array<unsigned char, 16>& a) const noexcept {
  return std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(a.data()), a.size()));
}

std::optional<connection_ticket> connection_gate::try_admit(const net::ip::address& client) {
  auto open = open_.load(std::memory_order_relaxed);
  do {
    if (max_total_ && open >= max_total_) return std::nullopt;
  } while (!open_.compare_exchange_weak(open, open + 1, std::memory_order_relaxed));
  // (Raised only when this admission is a new peak: a load, no write, for
  // the connections below it.)
  auto peak = peak_.load(std::memory_order_relaxed);
  while (open + 1 > peak &&
         !peak_.compare_exchange_weak(peak, open + 1, std::memory_order_relaxed)) {
  }
  connection_ticket ticket;
  ticket.gate_ = this;
  if (!max_per_client_) return ticket;
  // IPv4 as IPv4-mapped IPv6, so both families share one key type.
  ticket.client_ = client.is_v4()
                       ? net::ip::make_address_v6(net::ip::v4_mapped, client.to_v4()).to_bytes()
                       : client.to_v6().to_bytes();
  std::lock_guard lock(per_client_mutex_);
  auto& held = per_client_[ticket.client_];
  if (held >= max_per_client_) {
    ticket.within_client_limit_ = false;  // counted in the total only: it will be closed soon
    return ticket;
  }
  ++held;
  ticket.counted_for_client_ = true;
  return ticket;
}

std::size_t default_max_connections(std::size_t descriptor_limit) {
  constexpr std::size_t reserved = 100;
  return std::max<std::size_t>(64,
                               descriptor_limit > reserved ? (descriptor_limit - reserved) / 2 : 0);
}

std::size_t descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  return limit.rlim_cur == RLIM_INFINITY ? std::size_t(1) << 20
                                         : static_cast<std::size_t>(limit.rlim_cur);
}

std::size_t raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &raised);
  }
  return descriptor_limit();
}

}  // namespace tokengate
