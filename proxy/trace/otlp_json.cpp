#include "trace/otlp_json.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace tokengate::trace {
namespace {

namespace json = boost::json;

json::object any_value(const attribute_value& v) {
  struct visit {
    json::object operator()(const std::string& s) const { return {{"stringValue", s}}; }
    // (64-bit integers are strings in OTLP/JSON)
    json::object operator()(std::int64_t n) const { return {{"intValue", std::to_string(n)}}; }
    json::object operator()(double d) const { return {{"doubleValue", d}}; }
    json::object operator()(bool b) const { return {{"boolValue", b}}; }
    json::object operator()(const std::vector<std::string>& list) const {
      json::array values;
      for (const auto& s : list) values.push_back(json::object{{"stringValue", s}});
      return {{"arrayValue", {{"values", std::move(values)}}}};
    }
  };
  return std::visit(visit{}, v);
}

json::array attributes_json(const std::vector<attribute>& attributes) {
  json::array out;
  for (const auto& a : attributes)
    out.push_back(json::object{{"key", a.key}, {"value", any_value(a.value)}});
  return out;
}

json::object span_json(const span& s) {
  json::object out{{"traceId", to_hex(s.trace)},
                   {"spanId", to_hex(s.id)},
                   {"name", s.name},
                   {"kind", static_cast<int>(s.kind)},
                   {"startTimeUnixNano", std::to_string(s.start_ns)},
                   {"endTimeUnixNano", std::to_string(s.end_ns)},
                   {"attributes", attributes_json(s.attributes)}};
  if (s.parent != span_id{}) out["parentSpanId"] = to_hex(s.parent);
  json::array events;
  for (const auto& e : s.events)
    events.push_back(json::object{{"name", e.name},
                                  {"timeUnixNano", std::to_string(e.time_ns)},
                                  {"attributes", attributes_json(e.attributes)}});
  if (!events.empty()) out["events"] = std::move(events);
  json::object status{{"code", static_cast<int>(s.status)}};
  if (!s.status_message.empty()) status["message"] = s.status_message;
  out["status"] = std::move(status);
  return out;
}

}  // namespace

std::string otlp_json(const std::vector<std::pair<std::string, std::string>>& resource,
                      const std::vector<span>& spans) {
  std::vector<attribute> resource_attributes;
  for (const auto& [k, v] : resource) resource_attributes.push_back({k, v});
  json::array spans_json;
  for (const auto& s : spans) spans_json.push_back(span_json(s));
  json::object request{
      {"resourceSpans",
       json::array{json::object{
           {"resource", {{"attributes", attributes_json(resource_attributes)}}},
           {"scopeSpans", json::array{json::object{
                              {"scope", {{"name", "tokengate"}, {"version", TOKENGATE_VERSION}}},
                              {"spans", std::move(spans_json)}}}}}}}};
  return json::serialize(request);
}

}  // namespace tokengate::trace
