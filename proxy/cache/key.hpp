#pragma once
// A request's place in the response cache: a SHA-256 of who may read the
// answer (the client key's name, or the route's with `scope: route`), the
// route, the model, the API path and the request body in a canonical form:
// members in a stable order, without those that do not change the answer
// (`stream`, `stream_options`, `user`, `metadata`). A streamed request and
// a whole one share their entry (cache/forms.hpp rebuilds the other form),
// except in the legacy completions API, which keeps them apart.
// Credentials never enter it: the key's name does, never its secret.
#include <optional>
#include <string>
#include <string_view>

#include "config/config.hpp"

namespace tokengate::cache {

struct key_material {
  std::string_view identity;  // the key's name, or "route:NAME" (scope: route)
  std::string_view route;
  std::string_view model;
  std::string_view path;
  std::string_view body;
  bool streamed = false;  // (apart only where forms.hpp cannot rebuild the other form)
};

// The key (64 hex digits), or why the request is not cached: "mode" (a
// sampled answer under mode: deterministic, neither temperature 0 nor a
// seed), "body" (not a JSON object).
struct key_or_reason {
  std::string key;
  std::string_view not_cached;  // empty when `key` is set
};
key_or_reason key_for(const config::cache_settings& settings, const key_material& m);

}  // namespace tokengate::cache
