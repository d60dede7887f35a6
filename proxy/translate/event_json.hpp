#pragma once
// Parsing one upstream event for a translation: into scratch space reused
// by every event on the thread (events are translated one at a time, each
// done with before the next), so a typical event costs no heap allocation.
#include <array>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <string_view>

namespace tokengate::translate {

inline thread_local std::array<unsigned char, 16 * 1024> event_scratch;

// Calls `read` with the event's object, or with null when its data is not
// a JSON object.
template <typename Read>
void read_event_json(std::string_view data, Read&& read) {
  boost::json::monotonic_resource scratch(event_scratch.data(), event_scratch.size());
  boost::system::error_code ec;
  auto value = boost::json::parse(data, ec, &scratch);
  read(!ec && value.is_object() ? &value.get_object() : nullptr);
}

}  // namespace tokengate::translate
