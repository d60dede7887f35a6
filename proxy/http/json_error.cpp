#include "http/json_error.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace tokengate {

std::string json_error_body(std::string_view message, std::string_view type,
                            std::string_view code) {
  namespace json = boost::json;
  json::object error{{"message", message}, {"type", type}, {"code", code}};
  return json::serialize(json::object{{"error", std::move(error)}});
}

std::string anthropic_error_body(std::string_view message, std::string_view type) {
  namespace json = boost::json;
  json::object error{{"type", type}, {"message", message}};
  return json::serialize(json::object{{"type", "error"}, {"error", std::move(error)}});
}

}  // namespace tokengate
