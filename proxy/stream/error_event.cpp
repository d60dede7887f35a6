#include "stream/error_event.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace tokengate::stream {

std::string make_error_event(dialect d, std::string_view type, std::string_view code,
                             std::string_view message) {
  namespace json = boost::json;
  switch (d) {
    case dialect::anthropic_messages: {
      json::object body{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
      return "event: error\ndata: " + json::serialize(body) + "\n\n";
    }
    case dialect::openai_responses: {
      json::object body{
          {"type", "error"}, {"code", code}, {"message", message}, {"param", nullptr}};
      return "event: error\ndata: " + json::serialize(body) + "\n\n";
    }
    default: {
      json::object body{{"error", {{"message", message}, {"type", type}, {"code", code}}}};
      return "data: " + json::serialize(body) + "\n\n";
    }
  }
}

}  // namespace tokengate::stream
