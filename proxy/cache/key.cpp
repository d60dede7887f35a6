#include "cache/key.hpp"

#include <algorithm>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <vector>

#include "cache/forms.hpp"
#include "scan/sha256.hpp"

namespace tokengate::cache {
namespace {

namespace json = boost::json;

// The request's canonical text, written straight into the key's material
// (nothing is copied first): every object's members sorted by name, so
// that two bodies that differ only in their order are one request. The
// text is hashed, never read back: it need only be unambiguous.
void write_canonical(const json::value& v, std::string& out);

// The shortest text that reads back as the same number (so 1 and 1.0 are
// one request, as JSON means them to be).
template <typename Number>
void write_number(Number n, std::string& out) {
  char digits[32];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
  out.append(digits, end);
}

// Its length, then its bytes as they are: where it ends is never in
// doubt, and nothing in it needs escaping.
void write_string(std::string_view s, std::string& out) {
  write_number(s.size(), out);
  out.push_back(':');
  out.append(s);
}

void write_object(const json::object& o, std::string& out) {
  std::vector<const json::key_value_pair*> members;
  members.reserve(o.size());
  for (const auto& m : o) members.push_back(&m);
  std::sort(members.begin(), members.end(),
            [](const auto* a, const auto* b) { return a->key() < b->key(); });
  out.push_back('{');
  for (const auto* m : members) {
    write_string(m->key(), out);
    out.push_back(':');
    write_canonical(m->value(), out);
    out.push_back(',');
  }
  out.push_back('}');
}

void write_canonical(const json::value& v, std::string& out) {
  switch (v.kind()) {
    case json::kind::object:
      return write_object(v.get_object(), out);
    case json::kind::array:
      out.push_back('[');
      for (const auto& item : v.get_array()) {
        write_canonical(item, out);
        out.push_back(',');
      }
      out.push_back(']');
      return;
    case json::kind::string:
      return write_string(v.get_string(), out);
    case json::kind::int64:
      return write_number(v.get_int64(), out);
    case json::kind::uint64:
      return write_number(v.get_uint64(), out);
    case json::kind::double_:
      return write_number(v.get_double(), out);
    case json::kind::bool_:
      out += v.get_bool() ? "true" : "false";
      return;
    case json::kind::null:
      out += "null";
      return;
  }
}

// Sampling at temperature 0, or seeded: the same request gives the same
// answer (as nearly as the engine allows).
bool deterministic(const json::object& body) {
  if (auto* seed = body.if_contains("seed"); seed && !seed->is_null()) return true;
  auto* t = body.if_contains("temperature");
  if (!t) return false;
  if (t->is_int64()) return t->get_int64() == 0;
  if (t->is_uint64()) return t->get_uint64() == 0;
  return t->is_double() && t->get_double() == 0.0;
}

}  // namespace

key_or_reason key_for(const config::cache_settings& settings, const key_material& m) {
  boost::system::error_code ec;
  unsigned char first_bytes[4096];  // (most bodies' values fit; a longer one goes on)
  json::monotonic_resource arena(first_bytes, sizeof first_bytes);
  auto parsed = json::parse(m.body, ec, &arena);
  if (ec || !parsed.is_object()) return {{}, "body"};
  auto& body = parsed.get_object();
  if (settings.mode == config::cache_mode::deterministic && !deterministic(body))
    return {{}, "mode"};
  for (auto member : {"stream", "stream_options", "user", "metadata"}) body.erase(member);
  std::string material;
  material.reserve(m.body.size() + 256);
  for (auto part : {m.identity, m.route, m.model, m.path}) material.append(part).push_back('\0');
  // (Where one form can be rebuilt from the other, both share the entry.)
  if (!shares_forms(dialect_for_path(m.path))) {
    material += m.streamed ? "stream" : "whole";
    material.push_back('\0');
  }
  write_canonical(parsed, material);
  return {sha256_hex(material), {}};
}

}  // namespace tokengate::cache
