// `tokengate bench` must recover the demo engine's known timings through
// the real proxy: prefill grows with the prompt, decode gaps match the rate,
// and concurrency raises throughput while per-request latency holds.
#include "bench/bench.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <boost/json/parse.hpp>

#include "support/hand_upstream.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

// Bench options aimed at the fixture's proxy, the rest at their defaults.
bench::options options_through(const proxy_fixture& f) {
  bench::options o;
  o.url = "http://127.0.0.1:" + std::to_string(f.port()) + "/v1";
  return o;
}

TEST(Bench, RecoversTheDemoEnginesTimings) {
  fixture_options fo;
  fo.decode_tokens_per_second =
      50;  // 20 ms between tokens; prefill: 5 ms + 10 ms per 1k prompt tokens
  proxy_fixture f(fo);
  auto o = options_through(f);
  o.requests = 8;
  o.max_tokens = 10;
  o.prompt_tokens = {100, 4000};
  o.concurrency = {1, 4};
  auto results = bench::run(o);
  ASSERT_EQ(results.size(), 4u);
  for (const auto& r : results) {
    EXPECT_EQ(r.ok, 8) << "errors at concurrency " << r.concurrency;
    EXPECT_EQ(r.output_tokens_total, 80);
    EXPECT_NEAR(r.inter_token.p50, 20, 4);
    EXPECT_NEAR(r.time_per_output_token.p50, 20, 4);
  }
  const auto& short_prompt = results[0];
  const auto& long_prompt = results[2];
  EXPECT_NEAR(short_prompt.ttft.p50, 5 + 1, 4);
  EXPECT_NEAR(long_prompt.ttft.p50 - short_prompt.ttft.p50, 39, 8)
      << "prefill: 10 ms per 1k prompt tokens";
  // Batching: four at once finish in about the time of one. Compared on the
  // long prompt, whose prefill (45 ms) four requests in a row would at
  // least double, and not on the short one (6 ms), where a loaded test
  // machine's scheduling delays alone came to 5.6 ms (a fresh clone's run
  // of scripts/test).
  EXPECT_GT(results[1].throughput_tokens_per_second(),
            3 * results[0].throughput_tokens_per_second());
  EXPECT_NEAR(results[3].ttft.p50, long_prompt.ttft.p50, 12);
}

// `--api responses`: the request in the Responses API's words (`input`,
// `max_output_tokens`) at /v1/responses, and its typed events timed as
// chat's are.
TEST(Bench, MeasuresTheResponsesApi) {
  proxy_fixture f;
  auto o = options_through(f);
  o.api = "responses";
  o.requests = 4;
  o.max_tokens =
      6;  // below the 20 tokens the engine would write: it must arrive as max_output_tokens
  o.extra_body = R"({"demo":{"ttft_ms":30,"interval_ms":10,"tokens":20}})";
  auto results = bench::run(o);
  ASSERT_EQ(results.size(), 1u);
  const auto& r = results[0];
  EXPECT_EQ(r.ok, 4);
  EXPECT_EQ(r.output_tokens_total, 4 * 6);
  // (Margins for a loaded test machine: scheduling delays of several ms.)
  EXPECT_NEAR(r.ttft.p50, 30, 12);
  EXPECT_NEAR(r.inter_token.p50, 10, 5);
}

TEST(Bench, MeasuresEventTransitFromAStampingSource) {
  proxy_fixture f;
  auto o = options_through(f);
  o.requests = 4;
  o.max_tokens = 5;
  o.prompt_tokens = {10};
  o.concurrency = {2};
  auto plain = bench::run(o);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].transit.count, 0u) << "no stamps, no transit figures";

  // The engine sleeps 30 ms between tokens; transit excludes that wait.
  o.extra_body = R"({"demo":{"ttft_ms":0,"interval_ms":30,"tokens":5,"stamp":true}})";
  auto stamped = bench::run(o);
  ASSERT_EQ(stamped.size(), 1u);
  EXPECT_EQ(stamped[0].ok, 4);
  EXPECT_EQ(stamped[0].transit.count, 20u) << "one transit per token event";
  EXPECT_GT(stamped[0].transit.p50, 0.0);
  EXPECT_LT(stamped[0].transit.p50, 15.0) << "transit includes the 30 ms sleeps";
  EXPECT_NEAR(stamped[0].inter_token.p50, 30, 15);
}

// The response's reads take the kernel's stamps and so go around Beast's
// timeout: the request's deadline must still hold for a stream that runs
// past it.
TEST(Bench, AStreamThatRunsPastTheTimeoutIsATimeout) {
  proxy_fixture f;
  auto o = options_through(f);
  o.requests = 2;
  o.concurrency = {2};
  o.max_tokens = 10;
  o.timeout = std::chrono::seconds(1);
  o.extra_body = R"({"demo":{"ttft_ms":0,"interval_ms":400,"tokens":10}})";  // 3.6 s of tokens
  auto start = std::chrono::steady_clock::now();
  auto results = bench::run(o);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].ok, 0);
  EXPECT_EQ(results[0].errors.at("timeout"), 2);
  EXPECT_LT(took, std::chrono::milliseconds(2500)) << "the deadline did not cut the stream";
}

// With a ramp-up the clients start one after another over it (client i of
// n at i/n of the ramp); the wait before a client's first request is not
// part of that request's time to first token.
TEST(Bench, ARampUpSpreadsTheClientsStartsWithoutCountingTheWait) {
  proxy_fixture f;
  auto o = options_through(f);
  o.requests = 4;
  o.concurrency = {4};
  o.max_tokens = 3;
  o.prompt_tokens = {10};
  o.extra_body = R"({"demo":{"ttft_ms":0,"interval_ms":20,"tokens":3}})";  // about 40 ms a stream
  auto at_once = bench::run(o);
  ASSERT_EQ(at_once.size(), 1u);
  EXPECT_EQ(at_once[0].ok, 4);
  EXPECT_LT(at_once[0].wall_seconds, 0.4);

  o.ramp_up = std::chrono::milliseconds(800);
  auto ramped = bench::run(o);
  ASSERT_EQ(ramped.size(), 1u);
  EXPECT_EQ(ramped[0].ok, 4);
  EXPECT_GE(ramped[0].wall_seconds, 0.6) << "the last client starts 600 ms in";
  EXPECT_LT(ramped[0].ttft.max, 100.0) << "a client's wait to start counted as time to first token";
}

TEST(Bench, TheJsonReportCarriesEachSuccessfulRequestsTtft) {
  fixture_options fo;
  fo.decode_tokens_per_second = 200;
  proxy_fixture f(fo);
  auto o = options_through(f);
  o.requests = 6;
  o.max_tokens = 3;
  o.concurrency = {2};
  auto report = boost::json::parse(bench::render_json(bench::run(o))).as_array().at(0).as_object();
  ASSERT_EQ(report.at("ok").to_number<int>(), 6);
  std::vector<double> each;
  for (const auto& v : report.at("ttft_ms_each").as_array()) each.push_back(v.to_number<double>());
  ASSERT_EQ(each.size(), 6u);
  // The same values the percentiles were taken from: nearest rank 3 of 6
  // is the median, the last the maximum.
  std::sort(each.begin(), each.end());
  const auto& ttft = report.at("ttft_ms").as_object();
  EXPECT_GT(each.front(), 0.0);
  EXPECT_DOUBLE_EQ(each[2], ttft.at("p50").to_number<double>());
  EXPECT_DOUBLE_EQ(each.back(), ttft.at("max").to_number<double>());
}

// Prompts in other scripts, as UTF-8 or as \u escapes (Python's json
// module): the same text either way, about four bytes a token raw.
TEST(Bench, WritesPromptsInOtherScriptsRawOrEscaped) {
  bench::options o;
  o.extra_body = R"({"user":"\ud83d\ude00"})";  // above U+FFFF: a surrogate pair when escaped
  for (std::string script : {"latin", "cyrillic", "han"}) {
    o.prompt_script = script;
    o.escape_non_ascii = false;
    auto raw = bench::request_body(o, 1000);
    o.escape_non_ascii = true;
    auto escaped = bench::request_body(o, 1000);
    EXPECT_TRUE(std::all_of(escaped.begin(), escaped.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x80;
    })) << script;
    EXPECT_NE(escaped.find("\\ud83d\\ude00"), std::string::npos) << script;
    EXPECT_EQ(boost::json::parse(raw), boost::json::parse(escaped)) << script;
    auto prompt = boost::json::parse(raw).at("messages").at(0).at("content").as_string();
    EXPECT_GE(prompt.size(), 4000u) << script;
    EXPECT_LT(prompt.size(), 4020u) << script;
    if (script != "latin") {
      EXPECT_GT(escaped.size(), raw.size() + 1000) << script << ": its letters are escaped";
    }
  }
  o.prompt_script = "klingon";
  EXPECT_THROW(bench::request_body(o, 10), std::runtime_error);
}

// Source code as the prompt: the same length, and in the JSON text an
// escape (a line end, a tab, a quote, a backslash) every dozen bytes or so.
TEST(Bench, WritesSourceCodePromptsFullOfEscapes) {
  bench::options o;
  o.prompt_script = "code";
  auto body = bench::request_body(o, 1000);
  auto prompt = boost::json::parse(body).at("messages").at(0).at("content").as_string();
  EXPECT_GE(prompt.size(), 4000u);
  EXPECT_LT(prompt.size(), 4030u);
  EXPECT_NE(prompt.find("return \"ok\";\n"), std::string::npos);
  EXPECT_NE(prompt.find("C:\\\\tmp"), std::string::npos);
  auto escapes = std::count(body.begin(), body.end(), '\\');
  EXPECT_GT(escapes, 4000 / 15) << "escapes in the JSON text";
}

// The proxy's body scan takes long non-ASCII prompts in either form (runs
// of 32 bytes, and \u escapes one after another) and forwards the text as
// it came.
TEST(Bench, LongChinesePromptsGoThroughTheProxyRawAndEscaped) {
  proxy_fixture f;
  auto o = options_through(f);
  o.requests = 2;
  o.max_tokens = 2;
  o.prompt_tokens = {5000};
  o.prompt_script = "han";
  o.extra_body = R"({"demo":{"ttft_ms":0,"interval_ms":0,"tokens":2}})";
  auto prompt = boost::json::parse(bench::request_body(o, 5000)).at("messages").at(0).at("content");
  for (bool escape : {false, true}) {
    o.escape_non_ascii = escape;
    auto r = bench::run(o).at(0);
    EXPECT_EQ(r.ok, 2) << "escaped: " << escape;
    EXPECT_TRUE(r.errors.empty()) << "escaped: " << escape;
    auto sent = boost::json::parse(f.engine_last_request().at("body").as_string());
    EXPECT_EQ(sent.at("messages").at(0).at("content"), prompt) << "escaped: " << escape;
  }
}

// What a hosted endpoint needs besides the body: the key in a header of
// its own (Azure OpenAI's `api-key`), never as a bearer token then, and
// fields of the caller's choice, which replace the defaults of their name.
TEST(Bench, SendsTheKeyInItsOwnHeaderAndTheCallersFields) {
  proxy_fixture f;
  ::setenv("TOKENGATE_BENCH_TEST_KEY", "key-from-env", 1);
  bench::options o;
  o.url =
      "http://127.0.0.1:" + std::to_string(f.engine_port()) + "/v1";  // (what bench sends, as sent)
  o.requests = 1;
  o.max_tokens = 2;
  o.prompt_tokens = {10};
  o.key_env = "TOKENGATE_BENCH_TEST_KEY";
  o.key_header = "api-key";
  o.headers = {bench::parse_header("OpenAI-Project: proj_x"),
               bench::parse_header("Accept:  application/json ")};
  auto results = bench::run(o);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].ok, 1);
  auto headers = f.engine_last_request().at("headers").as_object();
  EXPECT_EQ(headers.at("api-key"), "key-from-env");
  EXPECT_EQ(headers.at("OpenAI-Project"), "proj_x");
  EXPECT_EQ(headers.at("Accept"), "application/json");
  EXPECT_FALSE(headers.contains("Authorization")) << boost::json::serialize(headers);
}

TEST(Bench, RefusesAHeaderItCannotSend) {
  for (const char* bad : {"no colon", ": no name", "X Bad: name", "X-A: one\r\nInjected: two",
                          "Host: elsewhere", "content-length: 5", "Transfer-Encoding: chunked"})
    EXPECT_THROW(bench::parse_header(bad), std::runtime_error) << bad;
  EXPECT_EQ(bench::parse_header("anthropic-beta:tools-2024-04-04").second, "tools-2024-04-04");
  bench::options o;
  o.url = "http://127.0.0.1:1/v1";
  o.key_header = "not a name";
  EXPECT_THROW(bench::run(o), std::runtime_error);
}

TEST(Bench, CountsErrorsByKind) {
  bench::options o;
  o.url = "http://127.0.0.1:1/v1";
  o.requests = 3;
  auto results = bench::run(o);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].ok, 0);
  EXPECT_EQ(results[0].errors.at("connect"), 3);
  EXPECT_EQ(results[0].error_examples.at("connect"), "Connection refused");
  auto table = bench::render_table(results);
  EXPECT_NE(table.find("connect:3"), std::string::npos);
  EXPECT_NE(table.find("connect: Connection refused"), std::string::npos) << table;
  EXPECT_EQ(table.find("0.0/0.0/0.0"), std::string::npos)
      << "nothing measured is not a time of 0: " << table;
}

// An error answer's own message is shown with its kind (the first of each
// kind), with the API key masked where the endpoint echoes it.
TEST(Bench, ShowsTheFirstErrorOfEachKindWithTheKeyMasked) {
  hand_upstream echoing{[](int listener) {
    for (;;) {
      int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) return;
      std::string got;
      char buf[4096];
      while (got.find("\r\n\r\n") == std::string::npos) {
        auto n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        got.append(buf, static_cast<std::size_t>(n));
      }
      auto at = got.find("Bearer ");
      auto key = at == std::string::npos ? std::string()
                                         : got.substr(at + 7, got.find("\r\n", at) - at - 7);
      const std::string body =
          "{\"error\":{\"message\":\"Incorrect API key provided: " + key + "\"}}\n";
      const std::string answer =
          "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
      ::close(fd);
    }
  }};
  ::setenv("TOKENGATE_BENCH_TEST_SECRET", "sk-test-0123456789", 1);
  bench::options o;
  o.url = echoing.base_url();
  o.requests = 2;
  o.key_env = "TOKENGATE_BENCH_TEST_SECRET";
  auto results = bench::run(o);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].errors.at("http_401"), 2);
  EXPECT_EQ(results[0].error_examples.at("http_401"),
            R"({"error":{"message":"Incorrect API key provided: ***"}})");
  auto report = bench::render_table(results) + bench::render_json(results);
  EXPECT_EQ(report.find("sk-test-0123456789"), std::string::npos) << report;
  EXPECT_NE(report.find("Incorrect API key provided: ***"), std::string::npos) << report;
  // Nothing was measured: null in the JSON, not a time of 0.
  auto ttft =
      boost::json::parse(bench::render_json(results)).as_array().at(0).at("ttft_ms").as_object();
  EXPECT_EQ(ttft.at("count").to_number<int>(), 0);
  EXPECT_TRUE(ttft.at("p50").is_null() && ttft.at("p99").is_null() && ttft.at("max").is_null())
      << ttft;
}

}  // namespace
}  // namespace tokengate::test
