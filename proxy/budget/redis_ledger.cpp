#include "budget/redis_ledger.hpp"

#include <openssl/sha.h>

#include "budget/redis_scripts.hpp"
#include "scan/hex.hpp"

namespace tokengate::budget::redis_ledger {
namespace {

std::string reserve_script() {
  return std::string(scripts::clock_and_windows) + std::string(scripts::reserve);
}
std::string peek_script() {
  return std::string(scripts::clock_and_windows) + std::string(scripts::peek);
}
std::string carry_script() {
  return std::string(scripts::clock_and_windows) + std::string(scripts::carry);
}

// What EVALSHA names a script by: the SHA-1 of its text, in hex.
std::string sha1_hex(const std::string& text) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return to_hex(digest, SHA_DIGEST_LENGTH);
}

const std::string& sha_of(int which) {
  static const std::string shas[] = {sha1_hex(reserve_script()),
                                     sha1_hex(std::string(scripts::settle)),
                                     sha1_hex(peek_script()), sha1_hex(carry_script())};
  return shas[which];
}

}  // namespace

std::vector<std::string> scripts() {
  return {reserve_script(), std::string(scripts::settle), peek_script(), carry_script()};
}

std::vector<std::string> reserve_command(const std::string& prefix, const demand& d,
                                         const std::string& id,
                                         const std::vector<long long>& leases) {
  std::vector<std::string> args{"EVALSHA", sha_of(0), "0",
                                prefix,    id,        std::to_string(d.slot_ttl_ms)};
  for (std::size_t i = 0; i < d.counters.size(); ++i) {
    const auto& c = d.counters[i];
    args.push_back(c.scope);
    args.emplace_back(kind_name(c.kind));
    args.push_back(std::to_string(c.limit));
    args.push_back(std::to_string(c.amount));
    args.push_back(std::to_string(i < leases.size() ? leases[i] : 0));
  }
  return args;
}

std::optional<reservation> read_reserve_reply(const redis::reply& r, const demand& d,
                                              std::string id) {
  const std::size_t n = d.counters.size();
  if (r.kind != redis::reply::type::array || r.elements.size() != 1 + 4 * n) return std::nullopt;
  auto refused = r.integer_at(0);
  if (!refused || *refused < 0 || *refused > static_cast<long long>(n)) return std::nullopt;
  reservation out;
  out.id = std::move(id);
  out.admitted = *refused == 0;
  out.refused_at = out.admitted ? 0 : static_cast<std::size_t>(*refused - 1);
  for (std::size_t i = 0; i < n; ++i) {
    auto used = r.integer_at(1 + 4 * i);
    auto reset = r.integer_at(2 + 4 * i);
    const auto& key = r.elements[3 + 4 * i];
    auto leased = r.integer_at(4 + 4 * i);
    if (!used || !reset || key.kind != redis::reply::type::bulk || !leased) return std::nullopt;
    out.states.push_back({*used, *reset});
    out.keys.push_back(key.text);
    out.leased.push_back(*leased);
  }
  return out;
}

std::vector<std::string> settle_command(const demand& d, const reservation& r, const usage& real) {
  return adjust_command(r, settle_deltas(d, real));
}

std::vector<std::string> give_back_command(const demand& d, const reservation& r) {
  return adjust_command(r, give_back_deltas(d));
}

std::vector<std::string> carry_command(const std::string& prefix,
                                       const std::vector<local_ledger::carried>& counted) {
  std::vector<std::string> args{"EVALSHA", sha_of(3), "0"};
  for (const auto& c : counted) {
    args.push_back(prefix + ':' + c.key);
    args.push_back(std::to_string(c.delta));
    args.push_back(std::to_string(c.window_end_ms));
  }
  return args;
}

std::vector<std::string> adjust_command(const reservation& r,
                                        const std::vector<long long>& deltas) {
  std::vector<std::string> args{"EVALSHA", sha_of(1), "0", r.id};
  for (std::size_t i = 0; i < r.keys.size() && i < deltas.size(); ++i) {
    args.push_back(r.keys[i]);
    args.push_back(std::to_string(deltas[i]));
  }
  return args;
}

std::vector<std::string> peek_command(const std::string& prefix, const demand& d) {
  std::vector<std::string> args{"EVALSHA", sha_of(2), "0", prefix};
  for (const auto& c : d.counters) {
    args.push_back(c.scope);
    args.emplace_back(kind_name(c.kind));
  }
  return args;
}

std::optional<std::vector<counter_state>> read_peek_reply(const redis::reply& r, const demand& d) {
  if (r.kind != redis::reply::type::array || r.elements.size() != 2 * d.counters.size())
    return std::nullopt;
  std::vector<counter_state> states;
  for (std::size_t i = 0; i < d.counters.size(); ++i) {
    auto used = r.integer_at(2 * i);
    auto reset = r.integer_at(2 * i + 1);
    if (!used || !reset) return std::nullopt;
    states.push_back({*used, *reset});
  }
  return states;
}

}  // namespace tokengate::budget::redis_ledger
