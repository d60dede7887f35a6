#include "translate/translation.hpp"

#include "translate/anthropic_from_chat.hpp"
#include "translate/chat_from_anthropic.hpp"
#include "translate/request.hpp"

namespace tokengate::translate {

std::optional<dialect> answer_dialect(dialect client, config::provider_kind kind) {
  using config::provider_kind;
  if (kind == provider_kind::any) return client;
  if (kind == provider_kind::openai)
    return client == dialect::anthropic_messages ? dialect::openai_chat : client;
  // An Anthropic upstream: its own API, or chat completions translated.
  if (client == dialect::anthropic_messages) return client;
  if (client == dialect::openai_chat) return dialect::anthropic_messages;
  return std::nullopt;
}

bool translates(dialect client, config::provider_kind kind) {
  auto answer = answer_dialect(client, kind);
  return answer && *answer != client;
}

std::variant<target_request, request_error> request_for_target(
    std::string_view body, dialect client, std::string_view path,
    const routing::routed_request& routed, const config::route_target& target,
    const config::upstream& upstream, bool ask_usage) {
  auto answers_in = answer_dialect(client, upstream.kind);
  if (!answers_in)
    return request_error::client(
        400, "unsupported_api",
        "upstream '" + upstream.name + "' speaks Anthropic's Messages API only: " +
            std::string(path) + " cannot be translated to it (use /v1/chat/completions)");
  target_request out;
  if (*answers_in == client) {
    out.edits = routing::edits_for_target(body, path, routed, target, upstream, ask_usage);
    return out;
  }
  // The policy's edits first (model name, limit), without the usage it
  // would ask for: the translation asks for what it needs itself.
  auto edited = routing::body_for_target(body, path, routed, target, upstream, false);
  request_options options{routed.output_limit, upstream.limit_spelling};
  auto translated = client == dialect::openai_chat ? anthropic_request_from_chat(edited, options)
                                                   : chat_request_from_anthropic(edited, options);
  if (auto* e = std::get_if<request_error>(&translated)) return std::move(*e);
  out.edits.push_back({0, body.size(), std::move(std::get<translated_request>(translated).body)});
  out.translation = upstream::translated_attempt{
      *answers_in == dialect::anthropic_messages ? "/v1/messages" : "/v1/chat/completions",
      *answers_in};
  return out;
}

std::unique_ptr<stream::answer_translator> answer_translator_for(dialect client_dialect,
                                                                 dialect upstream_dialect,
                                                                 bool usage_asked,
                                                                 std::string model) {
  if (client_dialect == dialect::openai_chat && upstream_dialect == dialect::anthropic_messages)
    return std::make_unique<chat_from_anthropic>(usage_asked);
  if (client_dialect == dialect::anthropic_messages && upstream_dialect == dialect::openai_chat)
    return std::make_unique<anthropic_from_chat>(std::move(model));
  return nullptr;
}

}  // namespace tokengate::translate
