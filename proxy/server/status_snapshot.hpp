#pragma once
// The parts of /stats beyond the routes' figures that the status page
// shows: the process (version, uptime, config, reloads, listeners), each
// upstream's health and load, and the slowest recent requests. Plain
// functions over what the server gathers, so that server.cpp only gathers.
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "metrics/counters.hpp"
#include "server/slow_requests.hpp"

namespace tokengate {

// The last policy reload, as `serve` reported it to the server.
struct reload_note {
  std::string result;  // "success", "failure"; empty: none since start
  std::int64_t at_unix_ms = 0;
  std::string error;  // the refusal's file:line:column and reason
};

struct process_facts {
  std::chrono::system_clock::time_point started;
  const config::config* config = nullptr;  // the running policy
  const config::config* at_start = nullptr;
  std::uint64_t reloads_ok = 0, reloads_failed = 0;
  reload_note last_reload;
  std::map<std::string, std::uint16_t> ports;  // by listener name, as bound
  std::uint16_t admin_port = 0;
  std::size_t open_feeds = 0, max_feeds = 0;
};

boost::json::object process_json(const process_facts& facts);
// Every upstream of `cfg`: what the board knows of it (fleet::board::
// upstreams_json, parsed), or its defaults, and its health check's settings.
boost::json::object upstreams_json(const config::config& cfg, const boost::json::object& board);
boost::json::array slowest_json(const std::vector<slow_request>& slowest);
// The workers' same-target retries added to each upstream ("retries"), and
// their resumed streams to each route ("resumes": by result).
void add_retries_and_resumes(boost::json::object& upstreams, boost::json::object& routes,
                             const std::vector<const metrics::shard*>& shards);

}  // namespace tokengate
