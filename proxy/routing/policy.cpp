#include "routing/policy.hpp"

#include <algorithm>
#include <array>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <span>

namespace tokengate::routing {
namespace {

// The body itself is at fault (the client's side).
request_error bad_request(std::string_view code, std::string message) {
  return request_error::client(400, code, std::move(message));
}

// A well-formed request the policy refuses to serve as asked.
request_error over_limit(std::string_view code, std::string message) {
  return request_error::policy(400, "invalid_request_error", code, std::move(message));
}

bool is_glob(std::string_view pattern) {
  return pattern.find_first_of("*?") != std::string_view::npos;
}

bool serves_path(const config::route& r, std::string_view path) {
  return r.paths.empty() || std::find(r.paths.begin(), r.paths.end(), path) != r.paths.end();
}

bool key_allows(const config::client_key* key, std::string_view model) {
  if (!key || key->models.empty()) return true;
  return std::any_of(key->models.begin(), key->models.end(),
                     [&](const auto& p) { return glob_match(p, model); });
}

// The spellings of an output limit, by where they live.
constexpr std::string_view top_level_limit_fields[] = {"max_tokens", "max_completion_tokens",
                                                       "max_output_tokens", "n_predict"};

}  // namespace

std::string_view client_key_from(std::string_view authorization, std::string_view x_api_key) {
  if (authorization.size() > 7 &&
      (authorization.substr(0, 7) == "Bearer " || authorization.substr(0, 7) == "bearer "))
    return authorization.substr(7);
  return x_api_key;
}

std::variant<const config::client_key*, request_error> authenticate(const config::config& cfg,
                                                                    std::string_view client_key) {
  if (cfg.keys.empty()) return static_cast<const config::client_key*>(nullptr);
  if (client_key.empty())
    return request_error::policy(
        401, "authentication_error", "missing_api_key",
        "an API key is required (Authorization: Bearer <key> or x-api-key)");
  auto hash = sha256_hex(client_key);
  for (const auto& k : cfg.keys)
    if (k.sha256 == hash) return &k;
  return request_error::policy(401, "authentication_error", "invalid_api_key",
                               "the API key is not valid");
}

namespace {

using refusal = std::optional<request_error>;

// The members of `object` (whose text starts at `at` in the body) that the
// policy reads: each may appear once. With a key twice, parsers disagree
// on which one counts (most take the last, some the first), and the
// upstream might honour the one the policy did not read.
refusal named_once(const scanned_object& object, std::string_view prefix,
                   bool (*reads)(std::string_view)) {
  // (The policy reads eight names at most: no allocation for them.)
  std::array<std::string_view, 16> seen;
  std::size_t count = 0;
  for (const auto& m : object.members) {
    if (!reads(m.key)) continue;
    if (std::find(seen.begin(), seen.begin() + count, m.key) != seen.begin() + count)
      return bad_request("duplicate_member",
                         "the member '" + std::string(prefix) + m.key +
                             "' appears more than once; a request must name it once");
    if (count < seen.size()) seen[count++] = m.key;
  }
  return std::nullopt;
}

bool is_include_usage(std::string_view key) { return key == "include_usage"; }
bool is_num_predict(std::string_view key) { return key == "num_predict"; }

// An object member's own members, or nothing when it is not an object.
std::optional<scanned_object> inner_object(std::string_view body, const json_member* m) {
  if (!m || m->type != json_type::object) return std::nullopt;
  scan_error ignored;
  return scan_object(body.substr(m->begin, m->end - m->begin), ignored);
}

// The body scanned: a JSON object whose policy members appear once each.
refusal scan_body(std::string_view body, routed_request& out) {
  scan_error error;
  auto scanned = scan_object(body, error);
  if (!scanned) {
    if (error.message == "the body must be a JSON object")
      return bad_request("invalid_body", "the request body must be a JSON object");
    return bad_request("invalid_json", "malformed JSON at byte " + std::to_string(error.offset) +
                                           ": " + error.message);
  }
  out.scan = std::move(*scanned);
  if (auto e = named_once(out.scan, "", policy_reads)) return e;
  if (auto options = inner_object(body, out.scan.find("stream_options")))
    if (auto e = named_once(*options, "stream_options.", is_include_usage)) return e;
  if (auto options = inner_object(body, out.scan.find("options")))
    if (auto e = named_once(*options, "options.", is_num_predict)) return e;
  return std::nullopt;
}

// `model`, `stream` and whether the client asked for usage itself.
refusal read_model_and_stream(std::string_view body, routed_request& out) {
  const auto* model = out.scan.find("model");
  if (!model) return bad_request("missing_model", "the request needs a 'model'");
  auto model_name = string_value(body, *model);
  if (!model_name || model_name->empty())
    return bad_request("invalid_model", "'model' must be a non-empty string");
  out.model = *model_name;
  if (const auto* stream = out.scan.find("stream")) {
    if (stream->type == json_type::boolean)
      out.stream = body.substr(stream->begin, 4) == "true";
    else if (stream->type != json_type::null)
      return bad_request("invalid_stream", "'stream' must be a boolean");
  }
  const auto* options = out.scan.find("stream_options");
  if (auto inner = inner_object(body, options))
    if (const auto* usage = inner->find("include_usage"))
      out.client_asked_usage = usage->type == json_type::boolean &&
                               body.substr(options->begin + usage->begin, 4) == "true";
  return std::nullopt;
}

// The first route that serves the path and a pattern of it the model
// matches; then whether the key may use the model.
refusal find_route(const config::config& cfg, std::string_view path, routed_request& out) {
  for (const auto& r : cfg.routes) {
    if (!serves_path(r, path)) continue;
    auto hit = std::find_if(r.models.begin(), r.models.end(),
                            [&](const auto& p) { return glob_match(p, out.model); });
    if (hit != r.models.end()) {
      out.route = &r;
      out.matched_pattern = *hit;
      break;
    }
  }
  if (!out.route)
    return request_error::policy(
        404, "invalid_request_error", "model_not_found",
        "The model '" + out.model + "' does not exist or is not served at " + std::string(path));
  if (!key_allows(out.key, out.model))
    return request_error::policy(403, "permission_error", "model_not_allowed",
                                 "this API key may not use the model '" + out.model + "'");
  return std::nullopt;
}

refusal check_prompt_size(const config::route& route, std::size_t body_bytes) {
  if (route.max_prompt_bytes && body_bytes > route.max_prompt_bytes)
    return request_error::policy(413, "invalid_request_error", "prompt_too_large",
                                 "the request is " + std::to_string(body_bytes) +
                                     " bytes; route '" + route.name + "' accepts at most " +
                                     std::to_string(route.max_prompt_bytes));
  const auto prompt_tokens = prompt_tokens_estimate(body_bytes);
  if (route.max_prompt_tokens && prompt_tokens > static_cast<long long>(route.max_prompt_tokens))
    return over_limit("context_length_exceeded",
                      "the prompt is about " + std::to_string(prompt_tokens) + " tokens; route '" +
                          route.name + "' accepts at most " +
                          std::to_string(route.max_prompt_tokens));
  return std::nullopt;
}

// Every spelling of the output limit the client used must be a positive
// integer; the smallest one is what it asked for.
refusal read_requested_limit(std::string_view body, routed_request& out) {
  auto check_limit = [&](const json_member& m, std::string_view name) -> refusal {
    if (m.type == json_type::null) return std::nullopt;
    auto v = integer_value(body, m);
    if (name == "n_predict" && v && *v == -1) return std::nullopt;  // llama.cpp: "until done"
    if (!v || *v < 1)
      return bad_request("invalid_max_tokens",
                         "'" + std::string(name) + "' must be a positive integer");
    if (!out.requested_limit || *v < *out.requested_limit) out.requested_limit = *v;
    return std::nullopt;
  };
  for (auto name : top_level_limit_fields)
    if (const auto* m = out.scan.find(name))
      if (auto e = check_limit(*m, name)) return e;
  const auto* options = out.scan.find("options");
  if (auto inner = inner_object(body, options))
    if (const auto* m = inner->find("num_predict")) {
      json_member shifted = *m;
      shifted.begin += options->begin;
      shifted.end += options->begin;
      if (auto e = check_limit(shifted, "options.num_predict")) return e;
    }
  return std::nullopt;
}

// The limit sent and enforced: the client's, clamped to the ceiling (the
// route's, or the key's if lower) or refused over it; without one, the
// route's default (embeddings have no output).
refusal decide_output_limit(const config::route& route, std::string_view path,
                            routed_request& out) {
  std::optional<long long> ceiling = route.limits.ceiling;
  if (out.key && out.key->max_output_tokens && (!ceiling || *out.key->max_output_tokens < *ceiling))
    ceiling = out.key->max_output_tokens;
  if (out.requested_limit) {
    out.output_limit = out.requested_limit;
    if (ceiling && *out.requested_limit > *ceiling) {
      if (route.limits.mode == config::limit_mode::reject)
        return over_limit("max_tokens_exceeded",
                          "the output limit " + std::to_string(*out.requested_limit) +
                              " exceeds the maximum of " + std::to_string(*ceiling) +
                              " for model '" + out.model + "'");
      out.output_limit = ceiling;
      out.limit_clamped = true;
    }
  } else if (path != "/v1/embeddings") {
    auto inject = route.limits.default_output ? route.limits.default_output : ceiling;
    if (inject && ceiling && *inject > *ceiling) inject = ceiling;
    if (inject) {
      out.output_limit = inject;
      out.limit_injected = true;
    }
  }
  return std::nullopt;
}

}  // namespace

std::variant<routed_request, request_error> apply_policy(const config::config& cfg,
                                                         const request_view& request) {
  routed_request out;
  if (auto e = scan_body(request.body, out)) return std::move(*e);
  if (auto e = read_model_and_stream(request.body, out)) return std::move(*e);
  auto auth = authenticate(cfg, request.client_key);
  if (auto* e = std::get_if<request_error>(&auth)) return std::move(*e);
  out.key = std::get<const config::client_key*>(auth);
  if (auto e = find_route(cfg, request.path, out)) return std::move(*e);
  if (auto e = check_prompt_size(*out.route, std::max(request.body_bytes, request.body.size())))
    return std::move(*e);
  if (auto e = read_requested_limit(request.body, out)) return std::move(*e);
  if (auto e = decide_output_limit(*out.route, request.path, out)) return std::move(*e);
  return out;
}

bool policy_reads(std::string_view key) {
  if (key == "model" || key == "stream" || key == "stream_options" || key == "options") return true;
  return std::find(std::begin(top_level_limit_fields), std::end(top_level_limit_fields), key) !=
         std::end(top_level_limit_fields);
}

bool usage_needed(const routed_request& request, std::string_view path) {
  return request.stream && !request.client_asked_usage &&
         (path == "/v1/chat/completions" || path == "/v1/completions");
}

namespace {

// The spellings of the output limit each API knows (all of one family are
// read as one limit; the one the upstream honours is kept).
constexpr std::string_view completions_limit[] = {"max_tokens"};
constexpr std::string_view chat_limit[] = {"max_tokens", "max_completion_tokens"};
constexpr std::string_view responses_limit[] = {"max_output_tokens"};

struct limit_spelling {
  std::string_view wanted;                   // the one this upstream honours for this API
  std::span<const std::string_view> family;  // every spelling of the API
};

limit_spelling spelling_for(std::string_view path, const config::upstream& upstream,
                            const scanned_object& scan) {
  if (path == "/v1/responses") return {"max_output_tokens", responses_limit};
  if (path != "/v1/chat/completions") return {"max_tokens", completions_limit};
  if (upstream.limit_spelling == config::limit_field::max_completion_tokens ||
      (upstream.limit_spelling == config::limit_field::keep && scan.find("max_completion_tokens") &&
       !scan.find("max_tokens")))
    return {"max_completion_tokens", chat_limit};
  return {"max_tokens", chat_limit};
}

// The limit written once, in the wanted spelling, the others removed; and
// into llama.cpp's n_predict and Ollama's options.num_predict where present.
void add_limit_edits(std::string_view body, const scanned_object& scan,
                     const limit_spelling& spelling, const std::string& value,
                     std::vector<splice>& edits) {
  const json_member* kept = nullptr;
  std::vector<const json_member*> others;
  for (auto name : spelling.family)
    if (const auto* m = scan.find(name)) {
      if (name == spelling.wanted)
        kept = m;
      else
        others.push_back(m);
    }
  if (kept) {
    edits.push_back(replace_value(*kept, value));
    for (const auto* m : others) edits.push_back(remove_member(body, scan, *m));
  } else if (!others.empty()) {
    edits.push_back(rewrite_member(*others.front(), spelling.wanted, value));
    for (std::size_t i = 1; i < others.size(); ++i)
      edits.push_back(remove_member(body, scan, *others[i]));
  } else {
    edits.push_back(add_member(body, scan, spelling.wanted, value));
  }
  if (const auto* m = scan.find("n_predict")) edits.push_back(replace_value(*m, value));
  const auto* options = scan.find("options");
  if (auto inner = inner_object(body, options))
    if (const auto* m = inner->find("num_predict"))
      edits.push_back({options->begin + m->begin, options->begin + m->end, value});
}

// stream_options.include_usage turned on, for the accounting.
void add_usage_edits(std::string_view body, const scanned_object& scan,
                     std::vector<splice>& edits) {
  const auto* options = scan.find("stream_options");
  if (options && options->type == json_type::object) {
    auto inner = inner_object(body, options);
    if (!inner) return;
    if (const auto* m = inner->find("include_usage")) {
      edits.push_back({options->begin + m->begin, options->begin + m->end, "true"});
    } else {
      auto add = add_member(body.substr(options->begin, options->end - options->begin), *inner,
                            "include_usage", "true");
      edits.push_back({options->begin + add.begin, options->begin + add.end, add.replacement});
    }
    // vLLM and SGLang send usage in every chunk only when include_usage is
    // on too, so a client that asked for continuous_usage_stats alone got
    // none from them: with include_usage now on for the proxy's sake it is
    // turned off, and the client sees the chunks it would have seen.
    if (const auto* m = inner->find("continuous_usage_stats"))
      edits.push_back({options->begin + m->begin, options->begin + m->end, "false"});
  } else if (options) {
    edits.push_back(replace_value(*options, "{\"include_usage\":true}"));
  } else {
    edits.push_back(add_member(body, scan, "stream_options", "{\"include_usage\":true}"));
  }
}

}  // namespace

std::vector<splice> edits_for_target(std::string_view body, std::string_view path,
                                     const routed_request& request,
                                     const config::route_target& target,
                                     const config::upstream& upstream, bool ask_usage) {
  const auto& scan = request.scan;
  std::vector<splice> edits;
  edits.reserve(4);  // the model, the limit, the usage option: one allocation
  if (!target.model.empty() && target.model != request.model)
    edits.push_back(replace_value(*scan.find("model"), json_quote(target.model)));
  if (request.output_limit)
    add_limit_edits(body, scan, spelling_for(path, upstream, scan),
                    std::to_string(*request.output_limit), edits);
  if (ask_usage && usage_needed(request, path)) add_usage_edits(body, scan, edits);
  sort_splices(edits);
  return edits;
}

std::string body_for_target(std::string_view body, std::string_view path,
                            const routed_request& request, const config::route_target& target,
                            const config::upstream& upstream, bool ask_usage) {
  return apply_splices(body, edits_for_target(body, path, request, target, upstream, ask_usage));
}

std::string models_list_json(const config::config& cfg, const config::client_key* key) {
  namespace json = boost::json;
  json::array data;
  std::vector<std::string> seen;
  for (const auto& r : cfg.routes)
    for (const auto& m : r.models) {
      if (is_glob(m) || !key_allows(key, m) || std::find(seen.begin(), seen.end(), m) != seen.end())
        continue;
      seen.push_back(m);
      data.push_back(
          json::object{{"id", m}, {"object", "model"}, {"created", 0}, {"owned_by", "tokengate"}});
    }
  return json::serialize(json::object{{"object", "list"}, {"data", std::move(data)}});
}

}  // namespace tokengate::routing
