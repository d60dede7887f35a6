#pragma once
// Bounds on client connections, shared by every worker of the process:
//  - a total (limits.max_connections): at the limit each worker holds the
//    connection it just accepted and stops accepting, so new clients wait in
//    the kernel's listen backlog until a connection closes, rather than the process running out of
//    descriptors (which would fail upstream connects for streams already accepted);
//  - a per-address share (limits.max_connections_per_client): a client over
//    it still gets a clear answer (429 on its first request), then the close.
#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "io/net.hpp"

namespace tokengate {

class connection_gate;

// One accepted connection's place in the counts, given back when destroyed.
class connection_ticket {
 public:
  connection_ticket() = default;
  connection_ticket(connection_ticket&& other) noexcept { *this = std::move(other); }
  connection_ticket& operator=(connection_ticket&& other) noexcept;
  ~connection_ticket() { release(); }

  // False when the client's address already holds its share of connections.
  bool within_client_limit() const { return within_client_limit_; }

 private:
  friend class connection_gate;
  void release();
  connection_gate* gate_ = nullptr;
  std::array<unsigned char, 16> client_{};
  bool counted_for_client_ = false, within_client_limit_ = true;
};

class connection_gate {
 public:
  // max_total 0: no total bound; max_per_client 0: no per-address bound.
  connection_gate(std::size_t max_total, std::size_t max_per_client)
      : max_total_(max_total), max_per_client_(max_per_client) {}

  // Counts a connection just accepted from `client` (its address is kept only
  // with a per-client bound), or nothing when the total is reached (the worker then holds that
  // connection until a place frees). Any thread.
  std::optional<connection_ticket> try_admit(const net::ip::address& client);
  std::size_t open() const { return open_.load(std::memory_order_relaxed); }
  // The most connections open at once since the peak was last restarted,
  // so that a burst that came and went between two looks is still seen;
  // restart_peak() starts it again from those open now. Any thread.
  std::size_t peak() const { return peak_.load(std::memory_order_relaxed); }
  void restart_peak() { peak_.store(open(), std::memory_order_relaxed); }
  std::size_t max_total() const { return max_total_; }

 private:
  friend class connection_ticket;
  struct address_hash {
    std::size_t operator()(const std::array<unsigned char, 16>& a) const noexcept;
  };

  std::size_t max_total_, max_per_client_;
  std::atomic<std::size_t> open_{0};
  std::atomic<std::size_t> peak_{0};
  std::mutex per_client_mutex_;  // taken only when max_per_client is set
  std::unordered_map<std::array<unsigned char, 16>, std::size_t, address_hash> per_client_;
};

// The default total when the policy sets none: each stream holds two
// descriptors (client and upstream), and some are kept for pools, logs and
// the admin listener.
std::size_t default_max_connections(std::size_t descriptor_limit);

// The soft descriptor limit in force (RLIMIT_NOFILE).
std::size_t descriptor_limit();

// Raises the soft descriptor limit to the hard one (as nginx's
// worker_rlimit_nofile and Go's runtime do) and returns the soft limit now in
// force.
std::size_t raise_descriptor_limit();

}  // namespace tokengate
