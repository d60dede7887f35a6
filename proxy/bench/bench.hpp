#pragma once
// `tokengate bench`: measures any OpenAI-compatible or Anthropic endpoint
// the way LLM latency should be measured: time to first token, every gap
// between tokens, time per output token, tokens per second and duration, at
// p50 / p95 / p99 (never the average), with errors by kind. Token events
// are recognised by the same observer the proxy uses.
#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tokengate::bench {

struct options {
  std::string url = "http://127.0.0.1:8080/v1";  // base URL, as an SDK takes it
  std::string api = "openai";  // openai (chat completions) | responses (OpenAI's Responses) |
                               // anthropic (messages)
  std::string model = "demo";
  std::string key_env;  // environment variable holding the API key
  // The header the key goes in, as it is (Azure OpenAI's `api-key`); empty:
  // `Authorization: Bearer KEY`, or `x-api-key` for the anthropic API.
  std::string key_header;
  // More request header fields (name, value), as an SDK or a gateway in
  // front sends them: an organisation or project, a beta feature, a
  // client's user agent. They replace the defaults of the same name.
  std::vector<std::pair<std::string, std::string>> headers;
  int requests = 20;  // per sweep point
  std::vector<int> concurrency{1};
  std::vector<int> prompt_tokens{100};
  int max_tokens = 64;
  std::string extra_body;  // JSON members added to each request body
  // The synthetic prompt's writing system: latin (English-like words),
  // cyrillic or han, about four bytes a token in each; and whether the body
  // spells each non-ASCII character as a \u escape, as Python's json
  // module does by default (the JavaScript SDK and httpx since 0.28 send
  // UTF-8). What a proxy does with a long prompt depends on both.
  std::string prompt_script = "latin";
  bool escape_non_ascii = false;
  std::chrono::seconds timeout{300};  // per request
  // The clients start one after another over this time instead of at once,
  // so that many slow streams reach their steady state with their tokens
  // spread over the interval, as streams opened over time are (opened
  // together, every stream's token falls due at the same moment).
  std::chrono::milliseconds ramp_up{0};
  bool json = false;
  bool progress = false;  // a progress bar on stderr
};

struct percentiles {
  std::uint64_t count = 0;
  double p50 = 0, p95 = 0, p99 = 0, max = 0;  // milliseconds (tokens/s for rates)
};

struct point_result {
  int concurrency = 0;
  int prompt_tokens = 0;
  int requests = 0;
  int ok = 0;
  std::map<std::string, int> errors;  // by kind: connect, http_429, stream_error, timeout, …
  // The first error of each kind in words (the connection's error, or the
  // start of an error answer's body), the API key masked.
  std::map<std::string, std::string> error_examples;
  percentiles ttft, inter_token, time_per_output_token, tokens_per_second, duration;
  percentiles transit;  // event transit from a stamping source (the demo engine with stamp: true)
  // Each successful request's TTFT (ms), in the order the requests were
  // issued: for statistics over several runs (one run's p99 rests on its
  // few slowest requests; a p99 over the pooled runs does not).
  std::vector<double> ttft_each;
  double output_tokens_total = 0;
  double wall_seconds = 0;
  double throughput_tokens_per_second() const {
    return wall_seconds > 0 ? output_tokens_total / wall_seconds : 0;
  }
};

// The body of each request at a prompt length: the synthetic prompt (see
// options::prompt_script) and --extra-body's members; throws
// std::runtime_error on an unknown script or an --extra-body that is not a
// JSON object.
std::string request_body(const options& o, int prompt_tokens);

// "Name: value" as --header takes it; throws std::runtime_error on a name
// that is not a token, a value with control characters, or a field that
// frames the request (Host, Content-Length, Transfer-Encoding: the
// benchmark's own).
std::pair<std::string, std::string> parse_header(std::string_view text);

// Runs every (concurrency, prompt length) point; throws std::runtime_error
// on a bad URL or a missing key variable.
std::vector<point_result> run(const options& o);

std::string render_table(const std::vector<point_result>& results);
std::string render_json(const std::vector<point_result>& results);

}  // namespace tokengate::bench
