#include "cache/replay.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <vector>

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
// names (and Responses' sequence numbers from 0), the usage chunk left
// out where this client did not ask for it.
std::string replayed_events(const entry& e, bool hide_usage_chunk) {
  struct splicing final : stream::sse_sink {
    stream::resume_splice* splice;
    std::string out;
    void on_event(const stream::sse_event& event) override { splice->on_event(event, out); }
  } sink;
  stream::resume_splice splice(e.dialect, fresh_identity(e), hide_usage_chunk);
  sink.splice = &splice;
  stream::sse_parser parser;
  parser.feed(e.body, sink);
  return std::move(sink.out);
}

// A whole answer with fresh ids: its own, and (Responses) its output items'.
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
  return body;
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

std::string replayed(const entry& e, const replay_options& o) {
  auto body = e.streamed ? replayed_events(e, o.hide_usage_chunk) : replayed_whole(e);
  // An HTTP/1.1 stream is chunked as any relayed one: one chunk, then the
  // last; HTTP/1.0 has no chunks: its length is known.
  const bool chunked = e.streamed && o.http_version >= 11;
  auto out = head_for(e, o, body.size(), chunked);
  if (!chunked) return out += body;
  char size[24];
  auto end = std::to_chars(size, size + sizeof size, body.size(), 16).ptr;
  out.append(size, end).append("\r\n").append(body).append("\r\n0\r\n\r\n");
  return out;
}

}  // namespace tokengate::cache
