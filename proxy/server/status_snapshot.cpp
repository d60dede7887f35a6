#include "server/status_snapshot.hpp"

namespace tokengate {
namespace {

using boost::json::value;

std::int64_t unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

boost::json::array listeners_json(const process_facts& facts) {
  boost::json::array out;
  for (const auto& l : facts.at_start->listeners) {
    auto port = facts.ports.count(l.name) ? facts.ports.at(l.name) : l.port;
    out.push_back(boost::json::object{{"name", l.name},
                                      {"url", std::string(l.tls ? "https://" : "http://") +
                                                  l.address + ":" + std::to_string(port) + "/v1"}});
  }
  return out;
}

}  // namespace

boost::json::object process_json(const process_facts& facts) {
  const auto now = std::chrono::system_clock::now();
  const auto& reload = facts.last_reload;
  const auto& admin = facts.at_start->admin;
  return boost::json::object{
      {"version", TOKENGATE_VERSION},
      {"started_unix_ms", unix_ms(facts.started)},
      {"now_unix_ms", unix_ms(now)},
      {"uptime_s", std::chrono::duration_cast<std::chrono::seconds>(now - facts.started).count()},
      {"config_file", facts.config->source},
      {"reloads",
       boost::json::object{{"success", facts.reloads_ok},
                           {"failure", facts.reloads_failed},
                           {"last", reload.result.empty() ? value(nullptr)
                                                          : value(boost::json::object{
                                                                {"result", reload.result},
                                                                {"at_unix_ms", reload.at_unix_ms},
                                                                {"error", reload.error}})}}},
      {"listeners", listeners_json(facts)},
      {"admin", boost::json::object{{"port", facts.admin_port},
                                    {"trace_url", admin ? admin->trace_url : ""},
                                    {"feeds", facts.open_feeds},
                                    {"max_feeds", facts.max_feeds}}}};
}

boost::json::object upstreams_json(const config::config& cfg, const boost::json::object& board) {
  boost::json::object out;
  for (const auto& [name, u] : cfg.upstreams) {
    auto known = board.if_contains(name);
    boost::json::object o = known ? known->as_object()
                                  : boost::json::object{{"healthy", true},
                                                        {"health_changed_unix_ms", nullptr},
                                                        {"in_flight_streams", 0},
                                                        {"queued", 0},
                                                        {"engine_running", nullptr},
                                                        {"engine_waiting", nullptr},
                                                        {"prefix_cache_hit_ratio", nullptr}};
    // (Without a check the verdict stays "healthy": the page says unchecked.)
    o["health_check"] =
        u.health_check
            ? value(boost::json::object{{"path", u.health_check->path},
                                        {"interval_ms", u.health_check->interval.count()},
                                        {"unhealthy_after", u.health_check->unhealthy_after}})
            : value(nullptr);
    o["retries"] = 0;
    out[name] = std::move(o);
  }
  return out;
}

void add_retries_and_resumes(boost::json::object& upstreams, boost::json::object& routes,
                             const std::vector<const metrics::shard*>& shards) {
  auto bump = [](boost::json::object& o, std::string_view key, std::uint64_t n) {
    auto* v = o.if_contains(key);
    o[key] = (v ? v->to_number<std::int64_t>() : 0) + static_cast<std::int64_t>(n);
  };
  for (const auto* s : shards) {
    s->retries.each([&](const auto& k, std::uint64_t n) {  // route, upstream, reason
      if (auto* u = upstreams.if_contains(k[1]); u && u->is_object())
        bump(u->as_object(), "retries", n);
    });
    s->resumes.each([&](const auto& k, std::uint64_t n) {  // route, mode, reason, result
      auto* r = routes.if_contains(k[0]);
      if (!r || !r->is_object()) return;
      auto& route = r->as_object();
      if (!route.contains("resumes")) route["resumes"] = boost::json::object();
      bump(route["resumes"].as_object(), k[3], n);
    });
  }
}

boost::json::array slowest_json(const std::vector<slow_request>& slowest) {
  boost::json::array out;
  for (const auto& r : slowest)
    out.push_back(
        boost::json::object{{"route", r.route},
                            {"model", r.model},
                            {"upstream", r.upstream},
                            {"status", r.status},
                            {"ttft_us", r.ttft_us < 0 ? value(nullptr) : value(r.ttft_us)},
                            {"duration_us", r.duration_us},
                            {"request_id", r.request_id},
                            {"trace_id", r.trace_id.empty() ? value(nullptr) : value(r.trace_id)},
                            {"finished_unix_ms", r.finished_unix_ms}});
  return out;
}

}  // namespace tokengate
