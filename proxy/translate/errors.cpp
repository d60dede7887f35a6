#include "translate/errors.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <utility>

#include "http/json_error.hpp"
#include "stream/error_event.hpp"
#include "translate/json_out.hpp"

namespace tokengate::translate {
namespace {

namespace json = boost::json;

struct openai_words {
  std::string_view type, code;
};

// Anthropic's error types (docs "Errors") in OpenAI's types and codes.
openai_words openai_words_for(std::string_view anthropic_type) {
  if (anthropic_type == "invalid_request_error") return {"invalid_request_error", ""};
  if (anthropic_type == "authentication_error") return {"invalid_request_error", "invalid_api_key"};
  if (anthropic_type == "permission_error") return {"invalid_request_error", "permission_denied"};
  if (anthropic_type == "not_found_error") return {"invalid_request_error", "not_found"};
  if (anthropic_type == "request_too_large") return {"invalid_request_error", "request_too_large"};
  if (anthropic_type == "rate_limit_error") return {"requests", "rate_limit_exceeded"};
  if (anthropic_type == "overloaded_error") return {"server_error", "overloaded"};
  if (anthropic_type == "timeout_error") return {"server_error", "timeout"};
  return {"server_error", ""};
}

std::string_view anthropic_type_for_words(std::string_view type, std::string_view code) {
  auto says = [&](std::string_view word) {
    return type.find(word) != std::string_view::npos || code.find(word) != std::string_view::npos;
  };
  if (says("rate_limit") || type == "tokens" || type == "requests") return "rate_limit_error";
  if (says("overloaded")) return "overloaded_error";
  if (says("invalid_api_key") || says("authentication")) return "authentication_error";
  if (says("invalid_request")) return "invalid_request_error";
  return "api_error";
}

void append_openai_error(std::string& out, std::string_view message, std::string_view type,
                         std::string_view code) {
  out.append("{\"error\":{\"message\":");
  append_json_string(out, message);
  out.append(",\"type\":");
  append_json_string(out, type);
  out.append(",\"param\":null,\"code\":");
  if (code.empty())
    out.append("null");
  else
    append_json_string(out, code);
  out.append("}}");
}

// The error object of a body in either shape, or nothing when it is not
// JSON (a load balancer's HTML page).
const json::object* error_detail(const json::value& v) {
  if (!v.is_object()) return nullptr;
  auto* e = v.get_object().if_contains("error");
  return e && e->is_object() ? &e->get_object() : nullptr;
}

std::string_view member(const json::object* o, std::string_view key) {
  if (!o) return {};
  auto* v = o->if_contains(key);
  return v && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

std::string fallback_message(unsigned status) {
  return "upstream answered " + std::to_string(status);
}

}  // namespace

std::string_view anthropic_type_for_status(unsigned status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

void anthropic_error_to_openai(unsigned& status, std::string& body) {
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  auto* detail = ec ? nullptr : error_detail(parsed);
  auto type = member(detail, "type");
  if (type.empty()) type = anthropic_type_for_status(status);
  auto message = member(detail, "message");
  std::string text = message.empty() ? fallback_message(status) : std::string(message);
  auto words = openai_words_for(type);
  if (status == 529) status = 503;  // (OpenAI's SDKs know no 529)
  std::string out;
  append_openai_error(out, text, words.type, words.code);
  body = std::move(out);
}

void openai_error_to_anthropic(unsigned& status, std::string& body) {
  boost::system::error_code ec;
  auto parsed = json::parse(body, ec);
  auto* detail = ec ? nullptr : error_detail(parsed);
  auto message = member(detail, "message");
  std::string text = message.empty() ? fallback_message(status) : std::string(message);
  if (status == 503) status = 529;  // overloaded, as Anthropic's API says it
  body = anthropic_error_body(text, anthropic_type_for_status(status));
}

std::string openai_error_event(std::string_view anthropic_type, std::string_view message) {
  auto words = openai_words_for(anthropic_type);
  return stream::make_error_event(dialect::openai_chat, words.type, words.code, message);
}

std::string anthropic_error_event(std::string_view openai_type, std::string_view openai_code,
                                  std::string_view message) {
  return stream::make_error_event(dialect::anthropic_messages,
                                  anthropic_type_for_words(openai_type, openai_code), openai_code,
                                  message);
}

}  // namespace tokengate::translate
