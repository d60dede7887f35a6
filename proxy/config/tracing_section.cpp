#include "config/tracing_section.hpp"

namespace tokengate::config {
namespace {

// A mapping of names to strings (`headers`, `resource`), `${ENV}` expanded.
std::vector<std::pair<std::string, std::string>> read_pairs(const reader& r, const char* key) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!r.has(key)) return out;
  auto map = r.child(key);
  if (!map.node().IsMap())
    map.fail(std::string("'") + key + "' must be a mapping of names to strings");
  for (const auto& entry : map.node()) {
    auto name = entry.first.as<std::string>();
    out.emplace_back(name, map.text(name.c_str(), ""));
  }
  return out;
}

}  // namespace

tracing_settings read_tracing(const reader& r) {
  r.only_keys({"endpoint", "headers", "ca_file", "sampling_ratio", "service_name",
               "service_instance_id", "resource", "queue_spans", "batch_spans", "export_interval",
               "timeout", "retries"});
  tracing_settings t;
  t.endpoint = r.text("endpoint", "");
  if (t.endpoint.rfind("http://", 0) != 0 && t.endpoint.rfind("https://", 0) != 0)
    r.fail(r.has("endpoint")
               ? "'endpoint' must start with http:// or https:// (e.g. "
                 "http://collector:4318/v1/traces)"
               : "'tracing' needs an 'endpoint' (e.g. http://collector:4318/v1/traces)");
  t.headers = read_pairs(r, "headers");
  t.ca_file = r.text("ca_file", "");
  t.sampling_ratio = r.number("sampling_ratio", t.sampling_ratio, 0.0, 1.0);
  t.service_name = r.text("service_name", t.service_name);
  t.service_instance_id = r.text("service_instance_id", "");
  t.resource = read_pairs(r, "resource");
  t.queue_spans = r.integer<std::size_t>("queue_spans", t.queue_spans, 1, 10'000'000);
  t.batch_spans = r.integer<std::size_t>("batch_spans", t.batch_spans, 1, 100'000);
  t.export_interval = r.time("export_interval", t.export_interval);
  if (t.export_interval.count() <= 0)
    r.fail_at(r.node()["export_interval"], "'export_interval' must be more than 0");
  t.timeout = r.time("timeout", t.timeout);
  if (t.timeout.count() <= 0) r.fail_at(r.node()["timeout"], "'timeout' must be more than 0");
  t.retries = r.integer<int>("retries", t.retries, 0, 10);
  return t;
}

}  // namespace tokengate::config
