#pragma once
// The pieces the whole-to-events rebuilding of cache/forms.hpp shares
// between its dialects, and the Responses API's events for a whole
// response.
#include <boost/json/object.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tokengate::cache {

// The text in pieces a word each: every piece but the first starts at a
// space (never inside a UTF-8 character). Empty text, no pieces.
std::vector<std::string_view> pieces_of(std::string_view text);

// The string member `key` of `o`, or "".
std::string_view text_at(const boost::json::object& o, std::string_view key);

// One event, its `event:` line first unless `type` is empty.
void add_event(std::string& out, std::string_view type, const boost::json::object& data);

// The Responses API's stream for a whole response: created, in progress,
// each output item added, its text a word a delta, done, then completed
// with the whole response; numbered from 0.
std::string responses_events(const boost::json::object& whole);

}  // namespace tokengate::cache
