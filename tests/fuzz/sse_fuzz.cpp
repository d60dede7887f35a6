// libFuzzer target: the SSE parser and the dialect observer.
// Oracles: the bytes split at an arbitrary point (taken from the input) must
// give exactly the events, and the facts, that one whole feed gives; the
// parser's offsets stay within what was fed; in every dialect, the lean
// reading (stream/*_dialect.hpp) gives every event the kinds the full one
// gives;
// fed a byte at a time (CRLF pairs kept together), where no event is ever
// whole in one feed, the parser reports the same events at the same
// offsets as fed whole, where single-line events take its shortcut.
// A whole answer's usage (stream/whole_usage.hpp) is the same however the
// body is split, and, where the body is a JSON object whose one `usage`
// member holds counts, what a parser finds there.
#include <array>
#include <boost/json/parse.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"
#include "stream/whole_usage.hpp"

using namespace tokengate::stream;

namespace {

constexpr std::array<tokengate::dialect, 4> dialects{
    tokengate::dialect::openai_chat, tokengate::dialect::openai_responses,
    tokengate::dialect::anthropic_messages, tokengate::dialect::other};

// One dialect's three readers: recording (always in full), lean, full.
struct readers {
  explicit readers(tokengate::dialect d)
      : observer(d, true), lean(d, false, true), full(d, false, false) {}
  stream_observer observer, lean, full;
  void on_event(const sse_event& e) {
    observer.on_event(e);
    lean.on_event(e);
    full.on_event(e);
    check(lean.last_kinds() == full.last_kinds());
    check(lean.last_kinds() == observer.last_kinds());
  }
};

struct recorder final : sse_sink {
  const sse_parser* parser = nullptr;
  std::vector<std::string> events;
  std::array<readers, dialects.size()> by_dialect{readers(dialects[0]), readers(dialects[1]),
                                                  readers(dialects[2]), readers(dialects[3])};
  void on_event(const sse_event& e) override {
    if (parser->boundary() > parser->position()) std::abort();
    events.push_back(std::string(e.type) + '\0' + std::string(e.data));
    for (auto& r : by_dialect) r.on_event(e);
  }
};

// Each event with the parser's offsets at its dispatch.
struct offsets final : sse_sink {
  const sse_parser* parser = nullptr;
  std::vector<std::string> seen;
  void on_event(const sse_event& e) override {
    seen.push_back(std::string(e.type) + '\0' + std::string(e.data) + '\0' +
                   std::to_string(parser->boundary()) + '-' + std::to_string(parser->position()));
  }
};

void whole_and_bytewise_agree(std::string_view body) {
  sse_parser whole_parser(4096), byte_parser(4096);
  offsets whole, bytewise;
  whole.parser = &whole_parser;
  bytewise.parser = &byte_parser;
  whole_parser.feed(body, whole);
  std::size_t from = 0;
  for (std::size_t at = 1; at < body.size(); ++at) {
    if (body[at - 1] == '\r' && body[at] == '\n') continue;
    byte_parser.feed(body.substr(from, at - from), bytewise);
    from = at;
  }
  byte_parser.feed(body.substr(from), bytewise);
  check(whole.seen == bytewise.seen);
  check(whole_parser.boundary() == byte_parser.boundary());
  check(whole_parser.oversized_events() == byte_parser.oversized_events());
}

}  // namespace

void whole_usage_agrees(std::string_view body, std::size_t split) {
  whole_usage whole, pieces;
  whole.feed(body);
  pieces.feed(body.substr(0, split));
  pieces.feed(body.substr(split));
  check(whole.input_tokens() == pieces.input_tokens());
  check(whole.output_tokens() == pieces.output_tokens());
  if (body.find("usage") != body.rfind("usage")) return;  // (duplicates: parsers differ)
  boost::system::error_code ec;
  auto parsed = boost::json::parse(body, ec);
  if (ec || !parsed.is_object()) return;
  auto* usage = parsed.get_object().if_contains("usage");
  if (!usage || !usage->is_object()) return;
  auto* out = usage->get_object().if_contains("completion_tokens");
  if (out && out->is_int64() && !usage->get_object().contains("output_tokens"))
    check(whole.output_tokens() == out->get_int64());
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  std::size_t split = data[0] % size;  // first byte chooses where to split
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  split = split > body.size() ? body.size() : split;

  sse_parser whole_parser(4096), split_parser(4096);  // small bound: exercise oversized events
  recorder whole, pieces;
  whole.parser = &whole_parser;
  pieces.parser = &split_parser;
  whole_parser.feed(body, whole);
  split_parser.feed(body.substr(0, split), pieces);
  check(split_parser.boundary() <= split_parser.fed() + split);
  split_parser.feed(body.substr(split), pieces);

  check(whole.events == pieces.events);
  check(whole_parser.boundary() == split_parser.boundary());
  check(whole_parser.boundary() <= body.size());
  check(whole_parser.at_event_boundary() == split_parser.at_event_boundary());
  for (std::size_t d = 0; d < dialects.size(); ++d) {
    const auto& a = whole.by_dialect[d].observer.facts();
    const auto& b = pieces.by_dialect[d].observer.facts();
    check(a.events == b.events && a.content_events == b.content_events &&
          a.finish_reason == b.finish_reason && a.output_tokens == b.output_tokens &&
          a.error == b.error && a.text_by_choice == b.text_by_choice);
    const auto& lean = whole.by_dialect[d].lean.facts();
    const auto& full = whole.by_dialect[d].full.facts();
    check(lean.input_tokens == full.input_tokens && lean.output_tokens == full.output_tokens &&
          lean.finish_by_choice == full.finish_by_choice &&
          lean.finish_reason == full.finish_reason && lean.usage_events == full.usage_events &&
          lean.content_events == full.content_events);
  }

  whole_and_bytewise_agree(body);
  whole_usage_agrees(body, split);

  // Ollama's NDJSON path, split the same way.
  stream_observer nd_whole(tokengate::dialect::other), nd_split(tokengate::dialect::other);
  nd_whole.feed_ndjson(body);
  nd_split.feed_ndjson(body.substr(0, split));
  nd_split.feed_ndjson(body.substr(split));
  check(nd_whole.facts().events == nd_split.facts().events);
  return 0;
}
