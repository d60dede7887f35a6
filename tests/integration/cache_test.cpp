// The response cache through the real proxy and the demo engine: a
// completed answer is kept and replayed, streamed event by event or whole,
// in every API, with fresh ids and the client's own usage chunk; a hit
// never reaches the upstream; what must not be kept is not; the client's
// Cache-Control is honoured; one key never reads another's answers; a
// hit's usage marks the prompt cached; a translated answer is kept and
// replayed in its client's API.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "routing/policy.hpp"
#include "support/proxy_fixture.hpp"
#include "support/redis_server.hpp"

namespace tokengate::test::response_cache {
namespace {

namespace json = boost::json;

const std::string key_a = "sk-cache-a", key_b = "sk-cache-b";

std::string keys_yaml() {
  return "keys:\n"
         "  - {name: a, sha256: " +
         routing::sha256_hex(key_a) +
         "}\n"
         "  - {name: b, sha256: " +
         routing::sha256_hex(key_b) + "}\n";
}

proxy_fixture cached_proxy(const std::string& cache = "{ttl: 60s}") {
  fixture_options o;
  o.top_extra =
      "routes:\n  - {name: demo, models: ['*'], targets: [{upstream: demo}], cache: " + cache +
      "}\n" + keys_yaml();
  return proxy_fixture(o);
}

// A deterministic request (temperature 0) of four tokens, which ends on
// its own; `demo`: the engine's knobs, `say`: the question.
std::string body(std::string_view path, bool stream,
                 std::string_view demo = R"({"tokens":4,"interval_ms":1})",
                 std::string_view say = "hi") {
  std::string b = R"({"model":"demo","temperature":0,"max_tokens":50,"demo":)" + std::string(demo);
  b += stream ? R"(,"stream":true)" : "";
  if (path == "/v1/responses") return b + R"(,"input":")" + std::string(say) + "\"}";
  return b + R"(,"messages":[{"role":"user","content":")" + std::string(say) + "\"}]}";
}

http_response ask(const proxy_fixture& f, std::string_view path, const std::string& b,
                  const std::string& key = key_a, const std::string& headers = "") {
  http_client c(f.port());
  c.send(post_json(std::string(path), b, "Authorization: Bearer " + key + "\r\n" + headers));
  auto r = read_response(c);
  EXPECT_TRUE(r.complete) << path;
  return r;
}

// The answers kept so far (the count on /metrics).
long long kept(const proxy_fixture& f) {
  auto page = http_get(f.admin_port(), "/metrics").body;
  const std::string series = "tokengate_cache_stored_total{route=\"demo\"} ";
  auto at = page.find(series);
  return at == std::string::npos ? 0 : std::stoll(page.substr(at + series.size()));
}

// A request whose answer is to be kept. The answer is kept once its
// exchange has ended, which may be a moment after its client has it all:
// this waits for that.
http_response ask_kept(const proxy_fixture& f, std::string_view path, const std::string& b,
                       const std::string& key = key_a) {
  auto before = kept(f);
  auto r = ask(f, path, b, key);
  EXPECT_TRUE(wait_until([&] { return kept(f) > before; }, 2s, "the answer to be kept"));
  return r;
}

std::string cache_header(const http_response& r) {
  auto h = r.headers.find("x-tokengate-cache");
  return h == r.headers.end() ? "" : h->second;
}

// The text of every content event of a stream, or of a whole answer, in
// any of the three APIs (the ids aside, what a client reads).
std::string text_of(const http_response& r) {
  std::string text;
  auto take = [&](const json::value& v) {
    if (!v.is_object()) return;
    const auto& o = v.as_object();
    if (auto* d = o.if_contains("delta"); d && d->is_string()) text += d->as_string();  // Responses
    if (auto* d = o.if_contains("delta"); d && d->is_object())
      if (auto* t = d->as_object().if_contains("text")) text += t->as_string();  // Anthropic
    if (auto* c = o.if_contains("choices"); c && c->is_array())
      for (const auto& choice : c->as_array()) {
        const auto& ch = choice.as_object();
        const auto* part =
            ch.if_contains("delta") ? ch.if_contains("delta") : ch.if_contains("message");
        if (part && part->is_object())
          if (auto* t = part->as_object().if_contains("content"); t && t->is_string())
            text += t->as_string();
      }
  };
  if (r.body.starts_with("{")) {
    auto whole = json::parse(r.body);
    take(whole);
    if (auto* content = whole.as_object().if_contains("content"); content && content->is_array())
      for (const auto& block : content->as_array()) text += block.at("text").as_string();
    if (auto* output = whole.as_object().if_contains("output"); output && output->is_array())
      for (const auto& item : output->as_array())
        for (const auto& part : item.at("content").as_array()) text += part.at("text").as_string();
    return text;
  }
  for (std::size_t at = r.body.find("data: "); at != std::string::npos;
       at = r.body.find("data: ", at + 1)) {
    auto line = r.body.substr(at + 6, r.body.find('\n', at) - at - 6);
    if (line != "[DONE]") take(json::parse(line));
  }
  return text;
}

std::size_t events_in(const http_response& r) {
  std::size_t n = 0;
  for (auto at = r.body.find("data: "); at != std::string::npos; at = r.body.find("data: ", at + 1))
    ++n;
  return n;
}

TEST(ResponseCache, AStreamIsReplayedEventByEventWithFreshIdsAndNeverReachesTheUpstream) {
  auto f = cached_proxy();
  const auto b = body("/v1/chat/completions", true);
  auto first = ask_kept(f, "/v1/chat/completions", b);
  EXPECT_EQ(cache_header(first), "miss");
  const auto asked = f.engine_stats().requests.load();
  auto again = ask(f, "/v1/chat/completions", b);
  EXPECT_EQ(cache_header(again), "hit");
  EXPECT_EQ(again.headers.at("age"), "0");
  EXPECT_EQ(again.headers.at("content-type"), "text/event-stream");
  EXPECT_EQ(f.engine_stats().requests.load(), asked);  // the upstream was not asked
  EXPECT_EQ(text_of(again), "The quick brown fox");
  EXPECT_EQ(text_of(again), text_of(first));
  EXPECT_EQ(events_in(again), events_in(first));  // the same events, not one aggregated
  EXPECT_GT(events_in(again), 4u);
  EXPECT_NE(again.body.find("[DONE]"), std::string::npos);
  // The ids are the hit's own; the usage chunk this client did not ask for stays out.
  auto id_of = [](const http_response& r) {
    auto line = r.body.substr(r.body.find("data: ") + 6);
    return std::string(json::parse(line.substr(0, line.find('\n'))).at("id").as_string());
  };
  EXPECT_NE(id_of(again), id_of(first));
  EXPECT_EQ(again.body.find("\"usage\""), std::string::npos);
  auto third = ask(f, "/v1/chat/completions", b);
  EXPECT_NE(id_of(third), id_of(again));
}

// The usage a hit reports for an original's `usage`: the whole prompt
// marked as read from the cache, in the API's own terms.
json::value marked_cached(std::string_view path, const json::value& usage) {
  auto u = usage.as_object();
  auto count = [&](std::string_view k) {
    auto* v = u.if_contains(k);
    return v ? v->to_number<std::int64_t>() : 0;
  };
  if (path == "/v1/messages") {
    auto prompt = count("input_tokens") + count("cache_read_input_tokens") +
                  count("cache_creation_input_tokens");
    u["input_tokens"] = 0;
    u["cache_creation_input_tokens"] = 0;
    u["cache_read_input_tokens"] = prompt;
  } else if (path == "/v1/responses") {
    auto& details = u["input_tokens_details"];
    if (!details.is_object()) details = json::object();
    details.as_object()["cached_tokens"] = count("input_tokens");
  } else {
    auto& details = u["prompt_tokens_details"];
    if (!details.is_object()) details = json::object();
    details.as_object()["cached_tokens"] = count("prompt_tokens");
  }
  return u;
}

TEST(ResponseCache, EachApiIsReplayedInItsOwnShapeStreamedAndWhole) {
  auto f = cached_proxy();
  for (std::string path : {"/v1/chat/completions", "/v1/messages", "/v1/responses"})
    for (bool stream : {true, false}) {  // (each its own question: the forms share entries)
      auto b = body(path, stream, R"({"tokens":4,"interval_ms":1})", stream ? "s" : "w");
      auto first = ask_kept(f, path, b);
      auto again = ask(f, path, b);
      EXPECT_EQ(cache_header(first), "miss") << path << " " << stream;
      EXPECT_EQ(cache_header(again), "hit") << path << " " << stream;
      EXPECT_EQ(text_of(again), "The quick brown fox") << path << " " << stream;
      if (!stream) {  // the usage a whole answer carries is the original's, marked cached
        EXPECT_EQ(json::parse(again.body).at("usage"),
                  marked_cached(path, json::parse(first.body).at("usage")));
        EXPECT_NE(json::parse(again.body).at("id"), json::parse(first.body).at("id"));
      }
    }
}

TEST(ResponseCache, WhatDidNotCompleteIsNeverKept) {
  auto f = cached_proxy();
  const std::string path = "/v1/chat/completions";
  auto twice_asked = [&](const std::string& b) {
    auto before = f.engine_stats().requests.load();
    ask(f, path, b);
    auto second = ask(f, path, b);
    EXPECT_NE(cache_header(second), "hit") << b;
    return f.engine_stats().requests.load() - before;
  };
  // cut at the output limit (the engine's finish: length)
  EXPECT_EQ(twice_asked(R"({"model":"demo","temperature":0,"max_tokens":2,"stream":true,)"
                        R"("messages":[{"role":"user","content":"a"}]})"),
            2u);
  // an error status (each one retried by the route's default retry policy)
  EXPECT_GE(twice_asked(body(path, false, R"({"status":500})")), 2u);
  // a stream that fails mid-answer
  EXPECT_GE(twice_asked(body(path, true, R"({"tokens":6,"reset_after":3})")), 2u);
}

TEST(ResponseCache, SampledRequestsPassByUnlessModeIsAlways) {
  const std::string path = "/v1/chat/completions";
  const std::string sampled =
      R"({"model":"demo","max_tokens":50,"demo":{"tokens":4},"messages":[{"role":"user","content":"hi"}]})";
  {
    auto f = cached_proxy();
    EXPECT_EQ(cache_header(ask(f, path, sampled)), "bypass");
    EXPECT_EQ(cache_header(ask(f, path, sampled)), "bypass");
    // a seed makes it deterministic enough
    const std::string seeded =
        R"({"model":"demo","seed":7,"max_tokens":50,"demo":{"tokens":4},"messages":[{"role":"user","content":"hi"}]})";
    ask_kept(f, path, seeded);
    EXPECT_EQ(cache_header(ask(f, path, seeded)), "hit");
  }
  auto f = cached_proxy("{ttl: 60s, mode: always}");
  ask_kept(f, path, sampled);
  EXPECT_EQ(cache_header(ask(f, path, sampled)), "hit");
}

TEST(ResponseCache, TheClientsCacheControlIsHonoured) {
  auto f = cached_proxy();
  const std::string path = "/v1/chat/completions";
  // no-store: answered, not kept
  const auto b1 = body(path, false, R"({"tokens":4})", "one");
  ask(f, path, b1, key_a, "Cache-Control: no-store\r\n");
  EXPECT_EQ(cache_header(ask(f, path, b1)), "miss");
  // no-cache: not read (the upstream answers), and still kept
  const auto b2 = body(path, false, R"({"tokens":4})", "two");
  ask_kept(f, path, b2);
  auto before = f.engine_stats().requests.load();
  EXPECT_EQ(cache_header(ask(f, path, b2, key_a, "Cache-Control: no-cache\r\n")), "bypass");
  EXPECT_EQ(f.engine_stats().requests.load(), before + 1);
  // max-age: only an entry younger than that
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(cache_header(ask(f, path, b2, key_a, "Cache-Control: max-age=0\r\n")), "miss");
  auto aged = ask(f, path, b2, key_a, "Cache-Control: max-age=60\r\n");
  EXPECT_EQ(cache_header(aged), "hit");
}

TEST(ResponseCache, OneKeyNeverReadsAnothersAnswersUnlessTheRouteSharesThem) {
  const std::string path = "/v1/chat/completions";
  const auto b = body(path, true);
  {
    auto f = cached_proxy();
    ask_kept(f, path, b, key_a);
    EXPECT_EQ(cache_header(ask(f, path, b, key_b)), "miss");
    EXPECT_EQ(cache_header(ask(f, path, b, key_a)), "hit");
  }
  auto f = cached_proxy("{ttl: 60s, scope: route}");
  ask_kept(f, path, b, key_a);
  EXPECT_EQ(cache_header(ask(f, path, b, key_b)), "hit");
}

TEST(ResponseCache, AnEntryLivesForItsTtl) {
  auto f = cached_proxy("{ttl: 1s}");
  const std::string path = "/v1/chat/completions";
  const auto b = body(path, false);
  ask_kept(f, path, b);
  EXPECT_EQ(cache_header(ask(f, path, b)), "hit");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(cache_header(ask(f, path, b)), "miss");
}

// What the client key's tokens_per_minute budget has counted (/budgets),
// or -1 where it has none.
double tokens_per_minute_used(proxy_fixture& f) {
  auto page = json::parse(http_get(f.admin_port(), "/budgets").body).as_object();
  for (const auto& v : page.at("budgets").as_array())
    if (v.at("limit").as_string() == "tokens_per_minute") return v.at("used").to_number<double>();
  return -1.0;
}

TEST(ResponseCache, AHitIsARequestToItsBudgetButNoTokens) {
  fixture_options o;
  o.top_extra =
      "routes:\n  - {name: demo, models: ['*'], targets: [{upstream: demo}], cache: "
      "{ttl: 60s}}\nkeys:\n  - name: a\n    sha256: " +
      routing::sha256_hex(key_a) +
      "\n    budget: {requests_per_minute: 3, tokens_per_minute: 100000}\n";
  proxy_fixture f(o);
  const std::string path = "/v1/chat/completions";
  const auto b = body(path, false);
  ask_kept(f, path, b);
  const auto after_miss = tokens_per_minute_used(f);
  EXPECT_GT(after_miss, 0);
  EXPECT_EQ(cache_header(ask(f, path, b)), "hit");
  EXPECT_EQ(cache_header(ask(f, path, b)), "hit");
  EXPECT_EQ(tokens_per_minute_used(f), after_miss);  // the hits cost no tokens
  auto refused = ask(f, path, b);  // … but each was a request: the fourth is one too many
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(error_code_of(refused), "rate_limit_exceeded");
}

TEST(ResponseCache, ItsCountsAreOnTheMetricsPage) {
  auto f = cached_proxy();
  const std::string path = "/v1/chat/completions";
  const auto b = body(path, false);
  ask_kept(f, path, b);
  ask(f, path, b);
  auto page = http_get(f.admin_port(), "/metrics").body;
  EXPECT_NE(page.find("tokengate_cache_requests_total{route=\"demo\",result=\"hit\"} 1"),
            std::string::npos);
  EXPECT_NE(page.find("tokengate_cache_requests_total{route=\"demo\",result=\"miss\"} 1"),
            std::string::npos);
  EXPECT_NE(page.find("tokengate_cache_stored_total{route=\"demo\"} 1"), std::string::npos);
  EXPECT_NE(page.find("tokengate_cache_entries 1"), std::string::npos);
}

// The usage a client reads, in any API and either form: a whole answer's,
// chat's usage chunk, Anthropic's message_start usage under message_delta's,
// the Responses API's completed response's.
json::value usage_of(const http_response& r) {
  if (r.body.starts_with("{")) return json::parse(r.body).at("usage");
  json::object merged;
  json::value found = nullptr;
  for (std::size_t at = r.body.find("data: "); at != std::string::npos;
       at = r.body.find("data: ", at + 1)) {
    auto line = r.body.substr(at + 6, r.body.find('\n', at) - at - 6);
    if (line == "[DONE]") continue;
    auto e = json::parse(line).as_object();
    if (auto* u = e.if_contains("usage"); u && u->is_object() && e.contains("choices")) found = *u;
    if (auto* m = e.if_contains("message"); m && m->is_object())
      merged = m->at("usage").as_object();
    if (auto* u = e.if_contains("usage"); u && u->is_object() && e.contains("delta"))
      for (const auto& [k, v] : u->as_object()) merged[k] = v;
    if (auto* resp = e.if_contains("response"); resp && e.at("type") == "response.completed")
      found = resp->at("usage");
  }
  return found.is_null() && !merged.empty() ? json::value(merged) : found;
}

std::string with_usage_asked(std::string_view path, std::string b) {
  if (path == "/v1/chat/completions") b.insert(1, R"("stream_options":{"include_usage":true},)");
  return b;
}

TEST(ResponseCache, StreamedAndWholeRequestsShareTheirEntryInEachApi) {
  auto f = cached_proxy();
  for (std::string path : {"/v1/chat/completions", "/v1/messages", "/v1/responses"}) {
    // kept from a stream, read whole
    auto streamed = ask_kept(f, path, with_usage_asked(path, body(path, true)));
    auto before = f.engine_stats().requests.load();
    auto whole = ask(f, path, body(path, false));
    EXPECT_EQ(cache_header(whole), "hit") << path;
    EXPECT_EQ(whole.headers.at("content-type"), "application/json") << path;
    EXPECT_EQ(text_of(whole), text_of(streamed)) << path;
    EXPECT_EQ(text_of(whole), "The quick brown fox") << path;
    EXPECT_EQ(usage_of(whole), marked_cached(path, usage_of(streamed))) << path << "\n"
                                                                        << streamed.body;
    EXPECT_FALSE(usage_of(whole).is_null()) << path;
    // kept whole, read as a stream: event by event, more than one content event
    auto other = [&](bool stream) { return body(path, stream, R"({"tokens":4})", "other"); };
    auto first = ask_kept(f, path, other(false));
    auto events = ask(f, path, with_usage_asked(path, other(true)));
    EXPECT_EQ(cache_header(events), "hit") << path;
    EXPECT_EQ(events.headers.at("content-type"), "text/event-stream") << path;
    EXPECT_EQ(text_of(events), text_of(first)) << path;
    EXPECT_EQ(usage_of(events), marked_cached(path, usage_of(first))) << path << "\n"
                                                                      << events.body;
    EXPECT_GE(events_in(events), 4u) << events.body;
    EXPECT_EQ(f.engine_stats().requests.load(), before + 1) << path;  // the one kept whole
  }
}

TEST(ResponseCache, AStreamKeptFromAWholeAnswerLeavesOutTheUsageChunkNotAskedFor) {
  auto f = cached_proxy();
  const std::string path = "/v1/chat/completions";
  ask_kept(f, path, body(path, false));
  auto events = ask(f, path, body(path, true));
  EXPECT_EQ(cache_header(events), "hit");
  EXPECT_EQ(text_of(events), "The quick brown fox");
  EXPECT_EQ(events.body.find("\"usage\""), std::string::npos);
  EXPECT_NE(events.body.find("[DONE]"), std::string::npos);
}

// How long asking takes, the whole answer read.
std::chrono::milliseconds timed(const std::function<void()>& ask_it) {
  auto start = std::chrono::steady_clock::now();
  ask_it();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

TEST(ResponseCache, PacedAHitTakesAboutTheOriginalsTimeUnpacedItDoesNot) {
  const std::string path = "/v1/chat/completions";
  const auto b = body(path, true, R"({"tokens":8,"interval_ms":40})");  // about 320 ms
  for (bool paced : {true, false}) {
    auto f = cached_proxy(paced ? "{ttl: 60s, pace: original}" : "{ttl: 60s}");
    http_response first, hit;
    auto original = timed([&] { first = ask_kept(f, path, b); });
    auto replayed = timed([&] { hit = ask(f, path, b); });
    EXPECT_EQ(cache_header(hit), "hit");
    EXPECT_EQ(text_of(hit), text_of(first));
    EXPECT_GE(original.count(), 250);
    if (paced) {
      EXPECT_GE(replayed.count(), original.count() * 7 / 10) << original.count();
      EXPECT_LE(replayed.count(), original.count() + 200) << original.count();
    } else {
      EXPECT_LT(replayed.count(), original.count() / 4) << original.count();
    }
  }
}

TEST(ResponseCache, ARouteThatBillsItsHitsCountsTheStoredTokens) {
  fixture_options o;
  o.top_extra =
      "routes:\n  - {name: demo, models: ['*'], targets: [{upstream: demo}], cache: "
      "{ttl: 60s, bill_hits: true}}\nkeys:\n  - name: a\n    sha256: " +
      routing::sha256_hex(key_a) + "\n    budget: {tokens_per_minute: 100000}\n";
  proxy_fixture f(o);
  const std::string path = "/v1/chat/completions";
  const auto b = body(path, false);
  ask_kept(f, path, b);
  const auto after_miss = tokens_per_minute_used(f);
  EXPECT_GT(after_miss, 0);
  EXPECT_EQ(cache_header(ask(f, path, b)), "hit");
  EXPECT_TRUE(
      wait_until([&] { return tokens_per_minute_used(f) == 2 * after_miss; }, 2s, "the hit billed"))
      << tokens_per_minute_used(f) << " after the miss " << after_miss;
}

proxy_fixture redis_cached_proxy(const std::string& redis_url) {
  fixture_options o;
  o.top_extra =
      "routes:\n  - {name: demo, models: ['*'], targets: [{upstream: demo}], cache: "
      "{ttl: 60s}}\n" +
      keys_yaml() + "redis: {url: \"" + redis_url + "\", timeout: 200ms}\ncache: {store: redis}\n";
  return proxy_fixture(o);
}

TEST(ResponseCache, InRedisTwoInstancesShareTheirAnswers) {
  redis_server redis;
  auto a = redis_cached_proxy(redis.url());
  auto b = redis_cached_proxy(redis.url());
  const std::string path = "/v1/messages";
  auto first = ask_kept(a, path, body(path, true));
  EXPECT_EQ(cache_header(first), "miss");
  // b has never asked its engine: the answer a kept is in Redis
  auto from_b = ask(b, path, body(path, false));
  EXPECT_EQ(cache_header(from_b), "hit");
  EXPECT_EQ(text_of(from_b), "The quick brown fox");
  EXPECT_EQ(usage_of(from_b), marked_cached(path, usage_of(first)));
  EXPECT_EQ(b.engine_stats().requests.load(), 0u);
  // another key's request is still its own
  EXPECT_EQ(cache_header(ask(b, path, body(path, false), key_b)), "miss");
  auto page = http_get(b.admin_port(), "/metrics").body;
  EXPECT_NE(page.find("tokengate_cache_store_up 1"), std::string::npos);
  EXPECT_NE(page.find("tokengate_cache_requests_total{route=\"demo\",result=\"hit\"} 1"),
            std::string::npos);
}

TEST(ResponseCache, InRedisTheEntryCarriesItsTtl) {
  redis_server redis;
  fixture_options o;
  o.top_extra =
      "routes:\n  - {name: demo, models: ['*'], targets: [{upstream: demo}], cache: "
      "{ttl: 1s}}\n" +
      keys_yaml() + "redis: {url: \"" + redis.url() +
      "\", timeout: 200ms}\ncache: {store: redis}\n";
  proxy_fixture f(o);
  const std::string path = "/v1/chat/completions";
  ask_kept(f, path, body(path, false));
  EXPECT_EQ(cache_header(ask(f, path, body(path, false))), "hit");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(cache_header(ask(f, path, body(path, false))), "miss");
}

TEST(ResponseCache, InRedisAStoreDownOrStalledIsAMissNeverAnErrorOrAStall) {
  redis_server redis;
  auto f = redis_cached_proxy(redis.url());
  const std::string path = "/v1/chat/completions";
  ask_kept(f, path, body(path, false));
  EXPECT_EQ(cache_header(ask(f, path, body(path, false))), "hit");
  // stalled: the store takes the connection but never answers
  ::kill(redis.pid(), SIGSTOP);
  http_response stalled;
  auto waited = timed([&] { stalled = ask(f, path, body(path, false)); });
  ::kill(redis.pid(), SIGCONT);
  EXPECT_EQ(stalled.status, 200);
  EXPECT_EQ(cache_header(stalled), "miss");
  EXPECT_EQ(text_of(stalled), "The quick brown fox");
  EXPECT_LT(waited.count(), 200 + 300) << "the wait is bounded by redis.timeout";
  // down: every request a miss, answered by the upstream
  redis.stop();
  for (int i = 0; i < 3; ++i) {
    http_response down;
    auto took = timed([&] { down = ask(f, path, body(path, false)); });
    EXPECT_EQ(down.status, 200);
    EXPECT_EQ(cache_header(down), "miss");
    EXPECT_EQ(text_of(down), "The quick brown fox");
    EXPECT_LT(took.count(), 200 + 300);
  }
  auto page = http_get(f.admin_port(), "/metrics").body;
  EXPECT_NE(page.find("tokengate_cache_store_up 0"), std::string::npos);
}

// The demo engine serving chat completions alone: an Anthropic or a
// Responses client on it is translated, and kept in its own dialect.
proxy_fixture one_api_cached_proxy(config::api api, const std::string& name) {
  fixture_options o;
  config::demo_engine_settings engine;
  engine.decode_tokens_per_second = 200;
  engine.apis = config::api_set().add(api);
  o.extra_engines = {engine};
  o.more_upstreams =
      "  one_api: {base_url: \"http://127.0.0.1:{engine1}/v1\", apis: [" + name + "]}\n";
  o.top_extra =
      "routes:\n  - {name: demo, models: ['*'], targets: [{upstream: one_api}], cache: "
      "{ttl: 60s}}\n" +
      keys_yaml();
  return proxy_fixture(o);
}

proxy_fixture chat_only_cached_proxy() {
  return one_api_cached_proxy(config::api::chat_completions, "chat_completions");
}

// The engine's knobs go in a header: a translation refuses a body member
// the upstream's API does not know.
const std::string demo_knobs = "x-demo: {\"tokens\":4,\"interval_ms\":1}\r\n";

std::string translated_body(std::string_view path, bool stream, std::string_view say) {
  std::string b = R"({"model":"demo","temperature":0)";
  b += stream ? R"(,"stream":true)" : "";
  if (path == "/v1/responses")
    return b + R"(,"max_output_tokens":50,"input":")" + std::string(say) + "\"}";
  b += R"(,"max_tokens":50)";
  return b + R"(,"messages":[{"role":"user","content":")" + std::string(say) + "\"}]}";
}

TEST(ResponseCache, ATranslatedAnswerIsKeptAndReplayedInItsClientsDialect) {
  auto f = chat_only_cached_proxy();
  for (std::string path : {"/v1/messages", "/v1/responses"}) {
    SCOPED_TRACE(path);
    for (bool stream : {true, false}) {
      const auto say = std::string(stream ? "streamed " : "whole ") + path;
      auto b = translated_body(path, stream, say);
      const auto before = kept(f);
      auto first = ask(f, path, b, key_a, demo_knobs);
      EXPECT_EQ(cache_header(first), "miss") << first.status << " " << first.body;
      EXPECT_TRUE(wait_until([&] { return kept(f) > before; }, 2s, "the answer to be kept"));
      const auto asked = f.extra_engine_stats(1).requests.load();
      auto again = ask(f, path, b, key_a, demo_knobs);
      EXPECT_EQ(cache_header(again), "hit") << stream;
      EXPECT_EQ(f.extra_engine_stats(1).requests.load(), asked);
      EXPECT_EQ(again.headers.at("content-type"), first.headers.at("content-type"));
      EXPECT_EQ(text_of(again), text_of(first));
      EXPECT_EQ(text_of(again), "The quick brown fox");
      auto original = usage_of(first);
      ASSERT_TRUE(original.is_object()) << first.body;
      EXPECT_EQ(usage_of(again), marked_cached(path, original)) << again.body;
      if (stream) {
        EXPECT_GE(events_in(again), 4u) << again.body;
      }
      // the other form shares the entry, in the same dialect
      auto other = ask(f, path, translated_body(path, !stream, say), key_a, demo_knobs);
      EXPECT_EQ(cache_header(other), "hit");
      EXPECT_EQ(text_of(other), "The quick brown fox");
      EXPECT_EQ(usage_of(other), marked_cached(path, original)) << other.body;
    }
  }
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);  // (the chat-only engine answered them all)
}

// On an Anthropic-only engine: a Responses client's answer is kept in
// the Responses API; a chat client's stream is kept only with its usage
// chunk (asked for), which a hit, whole or streamed, needs.
TEST(ResponseCache, OnAnAnthropicEngineChatAndResponsesClientsAreKeptInTheirOwnApi) {
  auto f = one_api_cached_proxy(config::api::messages, "messages");
  auto twice = [&](const std::string& path, const std::string& b) {
    auto first = ask(f, path, b, key_a, demo_knobs);
    EXPECT_EQ(first.status, 200) << first.body;
    EXPECT_EQ(text_of(first), "The quick brown fox") << first.body;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // (kept after the exchange)
    return std::pair{first, ask(f, path, b, key_a, demo_knobs)};
  };
  for (std::string path : {"/v1/responses", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    auto b = with_usage_asked(path, translated_body(path, true, "anthropic " + path));
    auto [first, again] = twice(path, b);
    EXPECT_EQ(cache_header(again), "hit");
    EXPECT_EQ(text_of(again), text_of(first));
    EXPECT_EQ(usage_of(again), marked_cached(path, usage_of(first))) << again.body;
    auto whole = ask(f, path, translated_body(path, false, "anthropic " + path), key_a, demo_knobs);
    EXPECT_EQ(cache_header(whole), "hit");
    EXPECT_EQ(text_of(whole), text_of(first));
  }
  // a chat stream without its usage chunk is not kept
  const std::string path = "/v1/chat/completions";
  auto [first, again] = twice(path, translated_body(path, true, "no usage asked"));
  EXPECT_EQ(cache_header(first), "miss");
  EXPECT_EQ(cache_header(again), "miss") << first.body << "\n" << again.body;
  EXPECT_EQ(again.body.find("\"usage\":{"), std::string::npos);
  EXPECT_EQ(f.engine_stats().requests.load(), 0u);  // (the Anthropic-only engine answered)
}

}  // namespace
}  // namespace tokengate::test::response_cache
