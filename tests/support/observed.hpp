#pragma once
// What the proxy's own observer reads in a whole SSE body: the events,
// text, usage and ending a client received, for tests to compare.
#include <string>

#include "http/dialect.hpp"
#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"

namespace tokengate::test {

inline stream::stream_facts observed(const std::string& body, dialect d = dialect::openai_chat) {
  stream::stream_observer o(d, true);
  stream::sse_parser p;
  p.feed(body, o);
  return o.facts();
}

}  // namespace tokengate::test
