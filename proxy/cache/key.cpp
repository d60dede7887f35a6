#include "cache/key.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <vector>

#include "cache/forms.hpp"
#include "scan/hex.hpp"

namespace tokengate::cache {
namespace {

namespace json = boost::json;

// The same value with every object's members sorted by name: two bodies
// that differ only in the order of their members are one request.
json::value sorted(const json::value& v) {
  if (v.is_array()) {
    json::array out;
    out.reserve(v.get_array().size());
    for (const auto& item : v.get_array()) out.push_back(sorted(item));
    return out;
  }
  if (!v.is_object()) return v;
  std::vector<const json::key_value_pair*> members;
  for (const auto& m : v.get_object()) members.push_back(&m);
  std::sort(members.begin(), members.end(),
            [](const auto* a, const auto* b) { return a->key() < b->key(); });
  json::object out;
  out.reserve(members.size());
  for (const auto* m : members) out.emplace(m->key(), sorted(m->value()));
  return out;
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

std::string sha256_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  return to_hex(digest, length);
}

}  // namespace

key_or_reason key_for(const config::cache_settings& settings, const key_material& m) {
  boost::system::error_code ec;
  auto parsed = json::parse(m.body, ec);
  if (ec || !parsed.is_object()) return {{}, "body"};
  auto& body = parsed.get_object();
  if (settings.mode == config::cache_mode::deterministic && !deterministic(body))
    return {{}, "mode"};
  for (auto member : {"stream", "stream_options", "user", "metadata"}) body.erase(member);
  std::string material;
  for (auto part : {m.identity, m.route, m.model, m.path}) material.append(part).push_back('\0');
  // (Where one form can be rebuilt from the other, both share the entry.)
  if (!shares_forms(dialect_for_path(m.path))) {
    material += m.streamed ? "stream" : "whole";
    material.push_back('\0');
  }
  material += json::serialize(sorted(parsed));
  return {sha256_hex(material), {}};
}

}  // namespace tokengate::cache
