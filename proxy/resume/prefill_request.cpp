#include "resume/prefill_request.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace tokengate::resume {
namespace {

namespace json = boost::json;

bool ends_with_assistant(const json::array& messages) {
  if (messages.empty() || !messages.back().is_object()) return false;
  auto* role = messages.back().get_object().if_contains("role");
  return role && role->is_string() && role->get_string() == "assistant";
}

// What is left of an output limit once `sent` tokens are out (at least one:
// a limit of 0 is refused by most APIs).
void lower_limit(json::object& body, std::string_view key, std::size_t sent) {
  auto* v = body.if_contains(key);
  if (!v || !v->is_int64()) return;
  auto left = v->get_int64() - static_cast<std::int64_t>(sent);
  *v = left > 1 ? left : 1;
}

}  // namespace

std::optional<std::string> prefill_body(std::string_view body, dialect target,
                                        std::string_view delivered, std::size_t delivered_tokens) {
  if (target != dialect::openai_chat && target != dialect::anthropic_messages) return std::nullopt;
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  if (ec || !parsed.is_object()) return std::nullopt;
  auto& request = parsed.get_object();
  auto* messages = request.if_contains("messages");
  if (!messages || !messages->is_array() || ends_with_assistant(messages->get_array()))
    return std::nullopt;
  messages->get_array().push_back(json::object{{"role", "assistant"}, {"content", delivered}});
  if (target == dialect::openai_chat) {
    request["continue_final_message"] = true;
    request["add_generation_prompt"] = false;
  }
  for (auto key : {"max_tokens", "max_completion_tokens"})
    lower_limit(request, key, delivered_tokens);
  return json::serialize(parsed);
}

}  // namespace tokengate::resume
