#include "translate/translation.hpp"

#include "translate/anthropic_from_chat.hpp"
#include "translate/anthropic_from_responses.hpp"
#include "translate/chat_from_anthropic.hpp"
#include "translate/chat_from_responses.hpp"
#include "translate/request.hpp"
#include "translate/responses_from_anthropic.hpp"
#include "translate/responses_from_chat.hpp"

namespace tokengate::translate {
namespace {

// The API a client's dialect is: the only other proxied POST is embeddings.
config::api api_of(dialect d) {
  switch (d) {
    case dialect::openai_chat:
      return config::api::chat_completions;
    case dialect::openai_completions:
      return config::api::completions;
    case dialect::openai_responses:
      return config::api::responses;
    case dialect::anthropic_messages:
      return config::api::messages;
    case dialect::other:
      break;
  }
  return config::api::embeddings;
}

std::string_view target_path(dialect d) {
  if (d == dialect::anthropic_messages) return "/v1/messages";
  if (d == dialect::openai_responses) return "/v1/responses";
  return "/v1/chat/completions";
}

using translated_or_refused = std::variant<translated_request, request_error>;

// A refusal by the second step of a request translated through chat
// names a chat member: named as the client sent it.
translated_or_refused named_for_client(translated_or_refused t, std::string_view chat_name,
                                       std::string_view client_name) {
  if (auto* e = std::get_if<request_error>(&t))
    if (auto at = e->message.find(chat_name); at != std::string::npos)
      e->message.replace(at, chat_name.size(), client_name);
  return t;
}

// A request translated in two steps, through chat completions (Responses
// ↔ Anthropic messages): the chat body between them is spelled the way
// the second step reads it.
template <typename First, typename Second>
translated_or_refused through_chat(std::string_view body, const request_options& options,
                                   First first, Second second) {
  request_options chat_options{options.output_limit, config::limit_field::keep};
  auto chat = first(body, chat_options);
  if (auto* e = std::get_if<request_error>(&chat)) return std::move(*e);
  return second(std::get<translated_request>(chat).body, options);
}

translated_or_refused translated_body(std::string_view body, dialect client, dialect upstream,
                                      const request_options& options) {
  if (upstream == dialect::anthropic_messages) {
    if (client == dialect::openai_chat) return anthropic_request_from_chat(body, options);
    return named_for_client(
        through_chat(body, options, chat_request_from_responses, anthropic_request_from_chat),
        "response_format", "text.format");
  }
  if (upstream == dialect::openai_responses) {
    if (client == dialect::openai_chat) return responses_request_from_chat(body, options);
    return named_for_client(
        through_chat(body, options, chat_request_from_anthropic, responses_request_from_chat),
        "'stop'", "'stop_sequences'");
  }
  if (client == dialect::openai_responses) return chat_request_from_responses(body, options);
  return chat_request_from_anthropic(body, options);
}

}  // namespace

std::optional<dialect> answer_dialect(dialect client, const config::upstream& upstream) {
  using config::api;
  auto served = config::served_apis(upstream);
  if (served.has(api_of(client))) return client;
  // The translations there are: chat completions ↔ messages and ↔
  // Responses directly, Responses ↔ messages through chat. Chat is the
  // first choice of a target that serves it (every engine does).
  const bool chat = client == dialect::openai_chat;
  const bool translatable =
      chat || client == dialect::anthropic_messages || client == dialect::openai_responses;
  if (!translatable) return std::nullopt;
  if (!chat && served.has(api::chat_completions)) return dialect::openai_chat;
  if (client != dialect::anthropic_messages && served.has(api::messages))
    return dialect::anthropic_messages;
  if (client != dialect::openai_responses && served.has(api::responses))
    return dialect::openai_responses;
  return std::nullopt;
}

bool sent_as_is(dialect client, const config::upstream& upstream) {
  return answer_dialect(client, upstream) == client;
}

request_error unsupported_api(const config::upstream& upstream, std::string_view path) {
  auto served = config::served_apis(upstream);
  if (served == config::api_set().add(config::api::messages))
    return request_error::client(
        400, "unsupported_api",
        "upstream '" + upstream.name + "' speaks Anthropic's Messages API only: " +
            std::string(path) + " cannot be translated to it (use /v1/chat/completions)");
  return request_error::client(400, "unsupported_api",
                               "upstream '" + upstream.name + "' serves " +
                                   config::api_names(served) + " only: " + std::string(path) +
                                   " cannot be translated for it");
}

std::variant<target_request, request_error> request_for_target(
    std::string_view body, dialect client, std::string_view path,
    const routing::routed_request& routed, const config::route_target& target,
    const config::upstream& upstream, bool ask_usage) {
  auto answers_in = answer_dialect(client, upstream);
  if (!answers_in) return unsupported_api(upstream, path);
  target_request out;
  if (*answers_in == client) {
    out.edits = routing::edits_for_target(body, path, routed, target, upstream, ask_usage);
    return out;
  }
  // The policy's edits first (model name, limit), without the usage it
  // would ask for: the translation asks for what it needs itself.
  auto edited = routing::body_for_target(body, path, routed, target, upstream, false);
  request_options options{routed.output_limit, upstream.limit_spelling};
  if (routed.route && routed.route->prompt_cache.automatic)
    options.prompt_cache_min_tokens = routed.route->prompt_cache.min_tokens;
  auto translated = translated_body(edited, client, *answers_in, options);
  if (auto* e = std::get_if<request_error>(&translated)) return std::move(*e);
  out.edits.push_back({0, body.size(), std::move(std::get<translated_request>(translated).body)});
  out.translation =
      upstream::translated_attempt{std::string(target_path(*answers_in)), *answers_in};
  return out;
}

std::unique_ptr<stream::answer_translator> answer_translator_for(dialect client_dialect,
                                                                 dialect upstream_dialect,
                                                                 bool usage_asked,
                                                                 std::string model) {
  using d = dialect;
  const auto client = client_dialect, upstream = upstream_dialect;
  if (client == d::openai_chat && upstream == d::anthropic_messages)
    return std::make_unique<chat_from_anthropic>(usage_asked);
  if (client == d::openai_chat && upstream == d::openai_responses)
    return std::make_unique<chat_from_responses>(usage_asked);
  if (client == d::anthropic_messages && upstream == d::openai_chat)
    return std::make_unique<anthropic_from_chat>(std::move(model));
  if (client == d::anthropic_messages && upstream == d::openai_responses)
    return std::make_unique<anthropic_from_responses>(std::move(model));
  if (client == d::openai_responses && upstream == d::openai_chat)
    return std::make_unique<responses_from_chat>(std::move(model));
  if (client == d::openai_responses && upstream == d::anthropic_messages)
    return std::make_unique<responses_from_anthropic>(std::move(model));
  return nullptr;
}

}  // namespace tokengate::translate
