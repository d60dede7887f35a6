#pragma once
// One kept answer, either form: a request asked with `stream: true` and
// the same request asked whole are one entry (cache/key.hpp), so a stored
// event stream is rebuilt as its dialect's whole answer, and a stored
// whole answer as its dialect's events. The content and the usage are the
// stored ones, value for value; only the framing is the proxy's.
//
// Chat completions, Anthropic messages and the Responses API have both
// forms; the legacy completions and anything else keep theirs apart
// (shares_forms).
#include <memory>
#include <string>
#include <string_view>

#include "cache/store.hpp"
#include "http/dialect.hpp"

namespace tokengate::cache {

bool shares_forms(dialect d);

// The whole answer a stored stream of `d` adds up to (its ids as stored:
// the replay makes them fresh). Empty when the events do not make one.
std::string whole_from_events(dialect d, std::string_view events);

// The events a client of `d` would have read for a stored whole answer:
// the opening, the text in pieces (a word a piece, so that a client sees
// it arrive event by event), the closing with the stored usage. Chat
// completions always end with the usage-only chunk (a replay leaves it
// out for a client that did not ask for it). Empty when the body is not
// an answer of `d`.
std::string events_from_whole(dialect d, std::string_view whole);

// `e` in the form a client asked for: itself when it is in that form, else
// a copy rebuilt in it (a stream rebuilt from a whole answer has no
// arrival marks: it is sent at once, paced or not). Null when it cannot
// be rebuilt (the request is then a miss).
std::shared_ptr<const entry> in_form(std::shared_ptr<const entry> e, bool streamed);

}  // namespace tokengate::cache
