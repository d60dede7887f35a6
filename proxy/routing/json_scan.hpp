#pragma once
// One pass over a request body: validates that it is well-formed JSON and
// records where each top-level member's value lies, so that the policy can
// read `model`, `stream` and the token limits and change them by splicing
// bytes, never by re-serialising a document of hundreds of KB (long
// conversations) or MBs (inline images).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "upstream/body_edits.hpp"

namespace tokengate::routing {

enum class json_type { object, array, string, number, boolean, null };

struct json_member {
  std::string key;        // unescaped
  std::size_t begin = 0;  // value's first byte
  std::size_t end = 0;    // one past its last byte
  json_type type = json_type::null;
  // Where the whole member starts (its key's opening quote) and, for
  // removal, where the member separator around it is.
  std::size_t member_begin = 0;
};

struct scanned_object {
  std::vector<json_member> members;  // in document order
  std::size_t open = 0;              // offset of '{'
  std::size_t close = 0;             // offset of '}'

  const json_member* find(std::string_view key) const;
};

struct scan_error {
  std::size_t offset;
  std::string message;
};

// The text must be one JSON object (whitespace around it allowed). Nesting
// deeper than max_depth is refused so a hostile body cannot exhaust the stack.
std::optional<scanned_object> scan_object(std::string_view text, scan_error& error,
                                          int max_depth = 128);

// For the start of a body still arriving: the offset of the ',' after the
// last top-level member it holds whole, or npos. The text up to there plus
// a '}' is an object with those members, at the same offsets.
std::size_t whole_members_end(std::string_view prefix);

// A scanned string value, unescaped (nullopt when it holds escapes we do not
// decode, i.e. \u sequences outside ASCII — then it is not a plain name).
std::optional<std::string> string_value(std::string_view text, const json_member& m);

// An integer value, exactly; nullopt for fractions, exponents, overflow,
// or anything that is not a number.
std::optional<long long> integer_value(std::string_view text, const json_member& m);

// The policy's changes to a body are upstream body edits.
using upstream::apply_splices;
using upstream::sort_splices;
using upstream::splice;

// Edits for common changes.
splice replace_value(const json_member& m, std::string json_value);
// Rewrites a whole member as "key":value (renaming a token-limit spelling).
splice rewrite_member(const json_member& m, std::string_view key, std::string json_value);
splice remove_member(std::string_view text, const scanned_object& object, const json_member& m);
splice add_member(std::string_view text, const scanned_object& object, std::string_view key,
                  std::string json_value);

std::string json_quote(std::string_view s);
// The same, appended to `out`.
void append_json_quoted(std::string& out, std::string_view s);

}  // namespace tokengate::routing
