#include "bench/bench.hpp"

#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include "http/head_bytes.hpp"
#include "http/token.hpp"
#include "io/any_stream.hpp"
#include "io/drained_read.hpp"
#include "io/tls_context.hpp"
#include "io/tls_direct.hpp"
#include "scan/hex.hpp"
#include "stream/observer.hpp"
#include "stream/whole_usage.hpp"
#include "upstream/target_url.hpp"

namespace tokengate::bench {
namespace {

namespace json = boost::json;
using clock = std::chrono::steady_clock;

struct sample {
  std::string error;  // empty: success
  // What the error was, in words: the connection's error, or the start of
  // an error answer's body (the endpoint's own message).
  std::string detail;
  double ttft_ms = 0, duration_ms = 0, tpot_ms = 0, tokens_per_second = 0;
  std::vector<double> gaps_ms;
  std::vector<double> transit_ms;  // from the demo engine's stamp to arrival here
  int tokens = 0;
};

// When a read's bytes arrived. On a socket the kernel stamps (plain TCP),
// `waited` is how long its newest bytes had been at the client's socket
// before the read (unknown when the kernel did not stamp them); on another
// (TLS) the read's own time stands for their arrival.
struct read_arrival {
  bool stamped_socket = false;
  std::optional<clock::duration> waited;
};

// Timestamps token events as the observer recognises them.
class token_clock final : public stream::sse_sink {
 public:
  token_clock(sample& s, dialect d) : s_(s), observer_(d) {}
  // A read's bytes, about to be parsed, and when they arrived.
  void at(clock::time_point now, read_arrival arrival) {
    now_ = now;
    arrival_ = arrival;
  }
  // The read's bytes are parsed. The kernel stamps only a read's newest
  // bytes, so only the event that ends the read has a known arrival: an
  // earlier one in the same read (the load was late and two had queued)
  // arrived before, how long before is not known, and is left out.
  void read_parsed(bool ends_at_event_boundary) {
    if (newest_transit_ && ends_at_event_boundary) s_.transit_ms.push_back(*newest_transit_);
    newest_transit_.reset();
  }
  void on_event(const stream::sse_event& e) override {
    observer_.on_event(e);
    if (!(observer_.last_kinds() & stream::content_kinds)) return;
    if (s_.tokens++ == 0)
      first_ = now_;
    else
      s_.gaps_ms.push_back(ms(now_ - last_));
    last_ = now_;
    record_transit(e.data);
  }
  const stream::stream_facts& facts() const { return observer_.facts(); }
  clock::time_point first() const { return first_; }
  clock::time_point last() const { return last_; }
  static double ms(clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  }

 private:
  // The demo engine's "demo_sent_us" stamp (same monotonic clock, same
  // machine): how long this event took from the engine's write to its
  // arrival at the client's socket. The time it then waited for this
  // client's read is left out: at thousands of streams the load's own busy
  // core made that wait, not the proxy, most of the figure.
  void record_transit(std::string_view data) {
    static constexpr std::string_view key = "\"demo_sent_us\":";
    auto at = data.find(key);
    if (at == std::string_view::npos) return;
    auto digits = data.substr(at + key.size());
    long long sent_us = 0;
    if (std::from_chars(digits.data(), digits.data() + digits.size(), sent_us).ec != std::errc{})
      return;
    auto sent = clock::time_point(std::chrono::microseconds(sent_us));
    if (!arrival_.stamped_socket)
      s_.transit_ms.push_back(ms(now_ - sent));
    else if (arrival_.waited)
      newest_transit_ = ms(now_ - *arrival_.waited - sent);
  }

  sample& s_;
  stream::stream_observer observer_;
  clock::time_point now_, first_, last_;
  read_arrival arrival_;
  std::optional<double> newest_transit_;
};

// The response's reads, as the connection's own, except that on plain TCP
// each one also takes the kernel's arrival time of its newest bytes
// (SO_TIMESTAMPNS through the drained read's recvmsg, as the relay does).
// The connection's deadline (one_request's) closes it under these reads too.
class arrival_stamped_reads {
 public:
  using executor_type = any_stream::executor_type;
  explicit arrival_stamped_reads(any_stream& s) : s_(s) {
    if (!s.is_tls()) reader_.emplace(s.socket(), s.reactor());  // (stamps asked for at connect)
  }
  executor_type get_executor() { return s_.get_executor(); }

  template <typename Buffers, typename Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    return net::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const Buffers& b) {
          if (reader_)
            reader_->async_read_some(net::mutable_buffer(*net::buffer_sequence_begin(b)),
                                     std::move(handler));
          else
            s_.async_read_some(b, std::move(handler));
        },
        token, buffers);
  }

  // When the last read's bytes arrived.
  read_arrival last_arrival() const {
    read_arrival a;
    a.stamped_socket = reader_.has_value();
    if (auto since = reader_ ? reader_->since_last_arrival() : std::nullopt)
      a.waited = std::chrono::duration_cast<clock::duration>(*since);
    return a;
  }

 private:
  any_stream& s_;
  std::optional<drained_reader> reader_;
};

// About four bytes per token, as engines estimate English text (the demo
// engine does exactly that), so --prompt-tokens means what it says. Other
// scripts take the same bytes (real tokenisers give Cyrillic and Chinese
// text more tokens per byte; the bytes are what a proxy handles). `code`
// is source code, as coding assistants send it: its line ends, tabs,
// quotes and backslashes are escapes in the JSON text, one every dozen
// bytes or so.
std::string synthetic_prompt(int tokens, std::string_view script) {
  static constexpr std::string_view latin[] = {"the ", "cat ", "sat ", "and ",
                                               "ran ", "far ", "but ", "not "};
  static constexpr std::string_view cyrillic[] = {"кот ",    "сел ", "и ",  "убежал ",
                                                  "далеко ", "но ",  "не ", "там "};
  static constexpr std::string_view han[] = {"猫咪", "坐下", "跑远",   "但是",
                                             "不要", "天气", "很好，", "我们。"};
  static constexpr std::string_view code[] = {
      "if (user.active) {\n",    "  return \"ok\";\n",      "}\n",
      "\tcount += 1;\n",         "path = \"C:\\\\tmp\";\n", "// retry once\n",
      "log(\"%s\\n\", name);\n", "x = f(a, b);\n"};
  const std::string_view* words = script == "latin"      ? latin
                                  : script == "cyrillic" ? cyrillic
                                  : script == "han"      ? han
                                  : script == "code"     ? code
                                                         : nullptr;
  if (!words) throw std::runtime_error("--prompt-script must be latin, cyrillic, han or code");
  std::string out;
  auto bytes = static_cast<std::size_t>(tokens) * 4;
  out.reserve(bytes + 16);
  for (int i = 0; out.size() < bytes; ++i) out += words[(i * 7 + i / 8) % 8];
  return out;
}

// JSON text with each non-ASCII character written as a \u escape (a
// surrogate pair above U+FFFF). Outside strings JSON has no such bytes, so
// the text's meaning is unchanged. The input is valid UTF-8 (serialised
// by Boost.JSON).
std::string escape_non_ascii(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  auto unit = [&](unsigned u) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += hex_digits[(u >> shift) & 0xF];
  };
  for (std::size_t i = 0; i < text.size();) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      out += text[i++];
      continue;
    }
    std::size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    unsigned code = b & (0x7F >> n);
    for (std::size_t k = 1; k < n; ++k)
      code = code << 6 | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    i += n;
    if (code < 0x10000) {
      unit(code);
    } else {
      code -= 0x10000;
      unit(0xD800 + (code >> 10));
      unit(0xDC00 + (code & 0x3FF));
    }
  }
  return out;
}

}  // namespace

std::string request_body(const options& o, int prompt_tokens) {
  json::array conversation{json::object{
      {"role", "user"}, {"content", synthetic_prompt(prompt_tokens, o.prompt_script)}}};
  // The Responses API names the limit and the conversation its own way.
  const bool responses = o.api == "responses";
  json::object body{{"model", o.model},
                    {"stream", true},
                    {responses ? "max_output_tokens" : "max_tokens", o.max_tokens},
                    {responses ? "input" : "messages", std::move(conversation)}};
  if (!o.extra_body.empty()) {
    auto extra = json::parse(o.extra_body);
    if (!extra.is_object()) throw std::runtime_error("--extra-body must be a JSON object");
    for (const auto& [k, v] : extra.get_object()) body[k] = v;
  }
  auto text = json::serialize(body);
  return o.escape_non_ascii ? escape_non_ascii(text) : text;
}

namespace {

std::string_view api_path(std::string_view api) {
  if (api == "anthropic") return "/v1/messages";
  if (api == "responses") return "/v1/responses";
  return "/v1/chat/completions";
}

struct point_state {
  const options& o;
  const upstream::target_url& url;
  std::shared_ptr<net::ssl::context> tls;
  std::string path, body, key;
  int next = 0, done = 0;
  std::vector<sample> samples;
};

net::awaitable<std::unique_ptr<any_stream>> connect(point_state& st, std::string& error,
                                                    std::string& detail) {
  auto ex = co_await net::this_coro::executor;
  tcp::resolver resolver(ex);
  auto [rec, endpoints] = co_await resolver.async_resolve(st.url.host, st.url.port, use_tuple);
  if (rec) {
    error = "resolve";
    detail = st.url.host + ": " + rec.message();
    co_return nullptr;
  }
  beast::tcp_stream tcp_stream(ex);
  tcp_stream.expires_after(std::chrono::seconds(10));
  auto [cec, ep] = co_await tcp_stream.async_connect(endpoints, use_tuple);
  if (cec) {
    error = "connect";
    detail = cec.message();
    co_return nullptr;
  }
  tcp_stream.socket().set_option(tcp::no_delay(true));
  if (!st.url.tls) {
    enable_receive_timestamps(
        tcp_stream.socket());  // for each event's arrival (arrival_stamped_reads)
    co_return std::make_unique<any_stream>(tcp_stream.release_socket());
  }
  auto stream = std::make_unique<any_stream>(tcp_stream.release_socket(), st.tls, tls_role::client);
  if (!tls_direct::expect_server(stream->native_tls(), st.url.host)) {
    error = "tls";
    detail = "cannot set TLS server name for " + st.url.host;
    co_return nullptr;
  }
  stream->expires_after(std::chrono::seconds(10));
  auto hec = co_await stream->tls_handshake();
  if (hec) {
    error = "tls";
    detail = hec.message();
    co_return nullptr;
  }
  stream->expires_never();
  co_return stream;
}

// The request's head: the API's fields, the key where the endpoint wants
// it, the caller's own fields.
std::string request_head(const point_state& st) {
  http::request<http::empty_body> req{http::verb::post, st.path, 11};
  req.set(http::field::host, st.url.host_header);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  if (st.o.api == "anthropic") req.set("anthropic-version", "2023-06-01");
  if (!st.key.empty()) {
    if (!st.o.key_header.empty())
      req.set(st.o.key_header, st.key);
    else if (st.o.api == "anthropic")
      req.set("x-api-key", st.key);
    else
      req.set(http::field::authorization, "Bearer " + st.key);
  }
  for (const auto& [name, value] : st.o.headers) req.set(name, value);
  req.content_length(st.body.size());
  return head_bytes(req.base());
}

// A 200 answer read to its end: an error event or no token is an error;
// else its timings.
void judge_complete_answer(sample& s, const token_clock& tokens, clock::time_point start,
                           clock::time_point end) {
  if (tokens.facts().error) {
    s.error = "stream_error", s.detail = "the stream ended with an error event";
    return;
  }
  if (s.tokens == 0) {
    s.error = "no_tokens", s.detail = "a 200 answer without a token event";
    return;
  }
  s.ttft_ms = token_clock::ms(tokens.first() - start);
  s.duration_ms = token_clock::ms(end - start);
  if (s.tokens > 1) {
    auto span = token_clock::ms(tokens.last() - tokens.first());
    s.tpot_ms = span / (s.tokens - 1);
    s.tokens_per_second = span > 0 ? (s.tokens - 1) * 1000.0 / span : 0;
  }
}

// A whole answer (asked for with "stream": false in --extra-body): its
// tokens are its usage's output tokens, and its time to first token is
// the time to the whole answer.
void judge_whole_answer(sample& s, const stream::whole_usage& usage, clock::time_point start,
                        clock::time_point end) {
  s.tokens = static_cast<int>(usage.output_tokens().value_or(0));
  if (s.tokens <= 0) {
    s.error = "no_tokens", s.detail = "a whole 200 answer without output tokens in its usage";
    return;
  }
  s.ttft_ms = s.duration_ms = token_clock::ms(end - start);
}

// One request on `conn` (opened if needed); fills `s`.
net::awaitable<void> one_request(point_state& st, std::unique_ptr<any_stream>& conn, sample& s) {
  if (!conn) {
    conn = co_await connect(st, s.error, s.detail);
    if (!conn) co_return;
  }
  const auto head = request_head(st);
  const std::array<net::const_buffer, 2> pieces{net::buffer(head), net::buffer(st.body)};
  conn->expires_after(st.o.timeout);  // the whole request: write, head and every event
  auto start = clock::now();
  auto [wec, wn] = co_await net::async_write(*conn, pieces, use_tuple);
  // The response is read stamped, its head too: events that come with the
  // head are read with it.
  arrival_stamped_reads reads(*conn);
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  error_code ec = wec;
  if (!ec) {
    auto [hec, hn] = co_await http::async_read_header(reads, buffer, parser, use_tuple);
    ec = hec;
  }
  if (ec) {
    s.error = conn->timed_out() ? "timeout" : "connect";
    s.detail = conn->timed_out() ? "no answer within --timeout" : ec.message();
    conn.reset();
    co_return;
  }
  bool ok_status = parser.get().result_int() == 200;
  if (!ok_status) s.error = "http_" + std::to_string(parser.get().result_int());
  constexpr std::size_t detail_bytes = 300;  // (an error body's message, not a whole page)
  const bool whole = !parser.get()[http::field::content_type].starts_with("text/event-stream");
  stream::whole_usage usage;
  stream::sse_parser sse;
  token_clock tokens(s, dialect_for_path(api_path(st.o.api)));
  std::array<char, 16384> chunk;
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    auto [rec, rn] = co_await http::async_read_some(reads, buffer, parser, use_tuple);
    if (rec == http::error::need_buffer) rec = {};
    auto got = chunk.size() - parser.get().body().size;
    if (got > 0 && ok_status && whole) {
      usage.feed(std::string_view(chunk.data(), got));
    } else if (got > 0 && ok_status) {
      tokens.at(clock::now(), reads.last_arrival());
      sse.feed(std::string_view(chunk.data(), got), tokens);
      tokens.read_parsed(sse.boundary() == sse.fed());
    } else if (got > 0 && s.detail.size() < detail_bytes) {
      s.detail.append(chunk.data(), std::min(got, detail_bytes - s.detail.size()));
    }
    if (rec) {
      if (s.error.empty()) {
        s.error = conn->timed_out() ? "timeout" : "stream_cut";
        s.detail = conn->timed_out() ? "the answer did not end within --timeout" : rec.message();
      }
      conn.reset();
      co_return;
    }
  }
  auto end = clock::now();
  if (!parser.keep_alive())
    conn.reset();
  else
    conn->expires_never();
  if (s.error.empty() && whole)
    judge_whole_answer(s, usage, start, end);
  else if (s.error.empty())
    judge_complete_answer(s, tokens, start, end);
}

void draw_progress(const point_state& st, int concurrency, int prompt) {
  int width = 30;
  int filled = st.o.requests ? st.done * width / st.o.requests : width;
  std::fprintf(stderr, "\r  concurrency %-4d prompt %-6d [%s%s] %d/%d", concurrency, prompt,
               std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(width - filled), '.').c_str(), st.done,
               st.o.requests);
  if (st.done == st.o.requests) std::fprintf(stderr, "\n");
}

// Client `index` of `concurrency`: starts at its share of the ramp-up, then
// takes requests until none are left.
net::awaitable<void> client_loop(point_state& st, int index, int concurrency, int prompt) {
  if (st.o.ramp_up.count() > 0 && index > 0) {
    net::steady_timer start_at(co_await net::this_coro::executor);
    start_at.expires_after(st.o.ramp_up * index / concurrency);
    co_await start_at.async_wait(use_tuple);
  }
  std::unique_ptr<any_stream> conn;
  while (st.next < st.o.requests) {
    auto index = static_cast<std::size_t>(st.next++);
    co_await one_request(st, conn, st.samples[index]);
    ++st.done;
    if (st.o.progress) draw_progress(st, concurrency, prompt);
  }
}

// An error's detail as it may be shown: on one line, control characters as
// spaces, and the key never, should an endpoint echo it.
std::string printable_detail(std::string detail, const std::string& key) {
  constexpr std::string_view mask = "***";
  if (!key.empty())
    for (auto at = detail.find(key); at != std::string::npos;
         at = detail.find(key, at + mask.size()))
      detail.replace(at, key.size(), mask);
  for (auto& c : detail)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  while (!detail.empty() && detail.back() == ' ') detail.pop_back();
  return detail;
}

percentiles summarise(std::vector<double> v) {
  percentiles p;
  p.count = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {  // nearest rank: a value that was really seen
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
  };
  p.p50 = at(0.50);
  p.p95 = at(0.95);
  p.p99 = at(0.99);
  p.max = v.back();
  return p;
}

point_result run_point(const options& o, const upstream::target_url& url,
                       std::shared_ptr<net::ssl::context> tls, const std::string& key,
                       int concurrency, int prompt) {
  point_state st{
      o, url, std::move(tls), url.upstream_path(api_path(o.api)), request_body(o, prompt), key};
  st.samples.resize(static_cast<std::size_t>(o.requests));
  net::io_context io(1);
  auto start = clock::now();
  for (int c = 0; c < concurrency; ++c)
    net::co_spawn(io, client_loop(st, c, concurrency, prompt), net::detached);
  io.run();
  point_result r;
  r.concurrency = concurrency;
  r.prompt_tokens = prompt;
  r.requests = o.requests;
  r.wall_seconds = std::chrono::duration<double>(clock::now() - start).count();
  std::vector<double> ttft, gaps, tpot, rate, duration, transit;
  for (const auto& s : st.samples) {
    if (!s.error.empty()) {
      if (++r.errors[s.error] == 1) r.error_examples[s.error] = printable_detail(s.detail, st.key);
      continue;
    }
    ++r.ok;
    ttft.push_back(s.ttft_ms);
    gaps.insert(gaps.end(), s.gaps_ms.begin(), s.gaps_ms.end());
    transit.insert(transit.end(), s.transit_ms.begin(), s.transit_ms.end());
    if (s.tokens > 1) {
      tpot.push_back(s.tpot_ms);
      rate.push_back(s.tokens_per_second);
    }
    duration.push_back(s.duration_ms);
    r.output_tokens_total += s.tokens;
  }
  r.ttft_each = ttft;
  r.ttft = summarise(std::move(ttft));
  r.inter_token = summarise(gaps);
  r.transit = summarise(transit);
  r.time_per_output_token = summarise(tpot);
  r.tokens_per_second = summarise(rate);
  r.duration = summarise(duration);
  return r;
}

}  // namespace

std::pair<std::string, std::string> parse_header(std::string_view text) {
  auto colon = text.find(':');
  auto name = text.substr(0, colon);
  if (colon == std::string_view::npos || !is_http_token(name))
    throw std::runtime_error("--header must be \"Name: value\", got \"" + std::string(text) + "\"");
  auto value = text.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (std::any_of(value.begin(), value.end(),
                  [](unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }))
    throw std::runtime_error("--header " + std::string(name) +
                             ": the value holds a control character");
  for (std::string_view framing : {"host", "content-length", "transfer-encoding"})
    if (beast::iequals(name, framing))
      throw std::runtime_error("--header cannot set " + std::string(name) +
                               ": the benchmark frames its requests");
  return {std::string(name), std::string(value)};
}

std::vector<point_result> run(const options& o) {
  auto url = upstream::parse_target_url(o.url);
  if (!url)
    throw std::runtime_error(
        "--url must be an http:// or https:// base URL, e.g. http://127.0.0.1:8080/v1");
  if (o.api != "openai" && o.api != "responses" && o.api != "anthropic")
    throw std::runtime_error("--api must be openai, responses or anthropic");
  std::string key;
  if (!o.key_env.empty()) {
    const char* v = std::getenv(o.key_env.c_str());
    if (!v) throw std::runtime_error("environment variable " + o.key_env + " is not set");
    key = v;
  }
  if (!o.key_header.empty() && !is_http_token(o.key_header))
    throw std::runtime_error("--key-header must be a header name, got \"" + o.key_header + "\"");
  auto tls = url->tls ? make_client_tls_context("") : nullptr;
  std::vector<point_result> results;
  for (int prompt : o.prompt_tokens)
    for (int c : o.concurrency) results.push_back(run_point(o, *url, tls, key, c, prompt));
  return results;
}

std::string render_table(const std::vector<point_result>& results) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof(line), "%-5s %-7s %-9s %-24s %-22s %-16s %-10s %-10s %-22s %s\n",
                "conc", "prompt", "ok/total", "TTFT ms p50/p95/p99", "ITL ms p50/p95/p99",
                "TPOT ms p50/p95", "tok/s p50", "total t/s", "duration ms p50/p95/p99", "errors");
  out << line;
  for (const auto& r : results) {
    std::string errors;
    for (const auto& [kind, n] : r.errors) errors += kind + ":" + std::to_string(n) + " ";
    // (Nothing measured shows as "-", not as a time of 0.)
    auto triple = [](const percentiles& p) {
      char b[64];
      std::snprintf(b, sizeof(b), "%.1f/%.1f/%.1f", p.p50, p.p95, p.p99);
      return p.count == 0 ? std::string("-") : std::string(b);
    };
    char tpot[48], ok[24];
    std::snprintf(tpot, sizeof(tpot), "%.1f/%.1f", r.time_per_output_token.p50,
                  r.time_per_output_token.p95);
    if (r.time_per_output_token.count == 0) std::snprintf(tpot, sizeof(tpot), "-");
    std::snprintf(ok, sizeof(ok), "%d/%d", r.ok, r.requests);
    std::snprintf(line, sizeof(line), "%-5d %-7d %-9s %-24s %-22s %-16s %-10.1f %-10.1f %-22s %s\n",
                  r.concurrency, r.prompt_tokens, ok, triple(r.ttft).c_str(),
                  triple(r.inter_token).c_str(), tpot, r.tokens_per_second.p50,
                  r.throughput_tokens_per_second(), triple(r.duration).c_str(),
                  errors.empty() ? "-" : errors.c_str());
    out << line;
  }
  bool first = true;
  for (const auto& r : results)
    for (const auto& [kind, example] : r.error_examples) {
      if (std::exchange(first, false)) out << "\nfirst error of each kind:\n";
      out << "  conc " << r.concurrency << " prompt " << r.prompt_tokens << " " << kind << ": "
          << example << "\n";
    }
  return out.str();
}

std::string render_json(const std::vector<point_result>& results) {
  json::array out;
  // Nothing measured (every request failed, or no stamps) is null, not a
  // timing of 0 that a script would take for a fast endpoint.
  auto pct = [](const percentiles& p) {
    auto value = [&p](double v) { return p.count ? json::value(v) : json::value(nullptr); };
    return json::object{{"count", p.count},
                        {"p50", value(p.p50)},
                        {"p95", value(p.p95)},
                        {"p99", value(p.p99)},
                        {"max", value(p.max)}};
  };
  for (const auto& r : results) {
    json::object errors, examples;
    for (const auto& [kind, n] : r.errors) errors[kind] = n;
    for (const auto& [kind, example] : r.error_examples) examples[kind] = example;
    out.push_back(
        json::object{{"concurrency", r.concurrency},
                     {"prompt_tokens", r.prompt_tokens},
                     {"requests", r.requests},
                     {"ok", r.ok},
                     {"errors", errors},
                     {"error_examples", examples},
                     {"ttft_ms", pct(r.ttft)},
                     {"ttft_ms_each", json::array(r.ttft_each.begin(), r.ttft_each.end())},
                     {"inter_token_ms", pct(r.inter_token)},
                     {"transit_ms", pct(r.transit)},  // null unless the source stamps events
                     {"time_per_output_token_ms", pct(r.time_per_output_token)},
                     {"tokens_per_second", pct(r.tokens_per_second)},
                     {"duration_ms", pct(r.duration)},
                     {"output_tokens", r.output_tokens_total},
                     {"wall_seconds", r.wall_seconds},
                     {"throughput_tokens_per_second", r.throughput_tokens_per_second()}});
  }
  return json::serialize(out);
}

}  // namespace tokengate::bench
