#include "http/request_error.hpp"

namespace tokengate {

std::string_view side_name(error_side side) {
  switch (side) {
    case error_side::client:
      return "client";
    case error_side::policy:
      return "policy";
    case error_side::upstream:
      return "upstream";
    case error_side::internal:
      break;
  }
  return "internal";
}

}  // namespace tokengate
