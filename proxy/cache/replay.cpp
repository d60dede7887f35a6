#include "cache/replay.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <ranges>
#include <vector>

#include "cache/cached_share.hpp"
#include "http/head_bytes.hpp"
#include "scan/hex.hpp"
#include "stream/resume_splice.hpp"
#include "stream/sse_parser.hpp"

namespace tokengate::cache {
namespace {

namespace json = boost::json;

// A new id in the old one's form: its prefix ("chatcmpl-", "msg_",
// "resp_") and fresh hex digits.
std::string fresh_id(std::string_view old) {
  auto cut = old.find_last_of("-_");
  std::string id(old.substr(0, cut == std::string_view::npos ? 0 : cut + 1));
  return id += random_hex_128();
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty() || from == to) return;
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

// The stored stream's names, and fresh ones for its replay.
upstream::stream_identity fresh_identity(const entry& e) {
  struct learner final : stream::sse_sink {
    dialect d;
    upstream::stream_identity seen;
    void on_event(const stream::sse_event& event) override {
      stream::learn_identity(d, event, seen);
    }
  } learn;
  learn.d = e.dialect;
  stream::sse_parser parser;
  parser.feed(e.body, learn);
  upstream::stream_identity fresh;
  if (!learn.seen.id.empty()) fresh.id = fresh_id(learn.seen.id);
  for (const auto& [index, id] : learn.seen.item_ids) fresh.item_ids[index] = fresh_id(id);
  return fresh;
}

// The stored events through a resume splice: the same events with fresh
// names (and Responses' sequence numbers from 0), the usage's cached share
// marked (cache/cached_share.hpp), the usage chunk left out where this
// client did not ask for it. Paced, the body is fed a
// mark at a time, and what each mark completes is one piece at its time.
std::vector<replay_piece> replayed_events(const entry& e, const replay_options& o) {
  struct splicing final : stream::sse_sink {
    stream::resume_splice* splice;
    dialect d;
    std::string out;
    void on_event(const stream::sse_event& event) override {
      auto marked = with_cached_share(d, event.data);  // (the usage's cached share)
      if (marked.empty())
        splice->on_event(event, out);
      else
        splice->on_event({event.type, marked}, out);
    }
  } sink;
  sink.d = e.dialect;
  stream::resume_splice splice(e.dialect, fresh_identity(e), o.hide_usage_chunk);
  sink.splice = &splice;
  stream::sse_parser parser;
  std::vector<replay_piece> pieces;
  std::size_t from = 0;
  if (o.paced)
    for (const auto& mark : e.marks) {
      if (mark.end <= from || mark.end > e.body.size()) continue;
      parser.feed(std::string_view(e.body).substr(from, mark.end - from), sink);
      from = mark.end;
      if (sink.out.empty()) continue;
      if (!pieces.empty() && pieces.back().at == mark.at)
        pieces.back().bytes += sink.out;
      else
        pieces.push_back({std::move(sink.out), mark.at});
      sink.out.clear();
    }
  parser.feed(std::string_view(e.body).substr(from), sink);
  if (!sink.out.empty() || pieces.empty())
    pieces.push_back(
        {std::move(sink.out), pieces.empty() ? std::chrono::milliseconds(0) : pieces.back().at});
  // (the gaps between events are the original's; the first goes at once)
  for (auto& p : pieces | std::views::reverse) p.at -= pieces.front().at;
  return pieces;
}

// A whole answer with fresh ids: its own, and (Responses) its output
// items'; its usage's cached share marked.
std::string replayed_whole(const entry& e) {
  std::string body = e.body;
  boost::system::error_code ec;
  auto parsed = json::parse(e.body, ec);
  if (ec || !parsed.is_object()) return body;
  std::vector<std::string> ids;
  if (auto* id = parsed.get_object().if_contains("id"); id && id->is_string())
    ids.emplace_back(id->get_string());
  if (auto* output = parsed.get_object().if_contains("output"); output && output->is_array())
    for (const auto& item : output->get_array())
      if (auto* id = item.is_object() ? item.get_object().if_contains("id") : nullptr;
          id && id->is_string())
        ids.emplace_back(id->get_string());
  for (const auto& id : ids) replace_all(body, id, fresh_id(id));
  auto marked = with_cached_share(e.dialect, body);
  return marked.empty() ? body : marked;
}

std::string head_for(const entry& e, const replay_options& o, std::size_t body_size, bool chunked) {
  head_writer head(200, "OK", 256, o.http_version);
  head.field("Content-Type", e.content_type);
  head.field("x-request-id", o.request_id);
  head.field("x-tokengate-cache", "hit");
  head.field("Age", std::to_string(o.age.count()));
  if (e.streamed) {
    head.field("Cache-Control", "no-cache");
    head.field("X-Accel-Buffering", "no");
  }
  if (chunked)
    head.field("Transfer-Encoding", "chunked");
  else
    head.field("Content-Length", std::to_string(body_size));
  if (!o.keep_alive) head.field("Connection", "close");
  return std::move(head).finish();
}

}  // namespace

// Each piece framed: an HTTP/1.1 stream is chunked as any relayed one (a
// chunk a piece, then the last); HTTP/1.0 has no chunks: its length is
// known. The head goes in front of the first.
std::vector<replay_piece> replay_pieces(const entry& e, const replay_options& o) {
  auto pieces =
      e.streamed ? replayed_events(e, o) : std::vector<replay_piece>{{replayed_whole(e), {}}};
  const bool chunked = e.streamed && o.http_version >= 11;
  std::size_t length = 0;
  for (const auto& p : pieces) length += p.bytes.size();
  auto head = head_for(e, o, length, chunked);
  for (auto& p : pieces) {
    if (!chunked) continue;
    char size[24];
    auto end = std::to_chars(size, size + sizeof size, p.bytes.size(), 16).ptr;
    if (!p.bytes.empty())
      p.bytes = std::string(size, end).append("\r\n").append(p.bytes).append("\r\n");
  }
  if (chunked) pieces.back().bytes += "0\r\n\r\n";
  pieces.front().bytes.insert(0, head);
  return pieces;
}

std::string replayed(const entry& e, const replay_options& o) {
  std::string out;
  for (auto& p : replay_pieces(e, o)) out += p.bytes;
  return out;
}

}  // namespace tokengate::cache
