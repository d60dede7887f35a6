#include "engine/demo_engine.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json.hpp>
#include <cerrno>
#include <functional>
#include <map>
#include <stdexcept>
#include <variant>

#include "engine/batch_scheduler.hpp"
#include "engine/demo_text.hpp"
#include "engine/prompt_cache.hpp"
#include "http/head_bytes.hpp"

namespace tokengate::engine {
namespace json = boost::json;
namespace {

using clock = std::chrono::steady_clock;

enum class api { chat, completions, messages, responses };

// What one request will produce, decided before the first byte is sent.
struct plan {
  api kind = api::chat;
  bool stream = false;
  bool include_usage = false;
  std::string model = "demo";
  std::size_t prompt_tokens = 1;
  std::size_t output_tokens = 0;
  bool hit_limit = false;  // stopped by the request's token limit, not naturally
  std::chrono::microseconds ttft{0};
  std::chrono::microseconds interval{0};
  long reset_after = -1;
  // Mid-stream faults: after N tokens the stream goes silent (until the
  // client leaves), or ends with an error event in its API's shape.
  long stall_after = -1;
  long error_after = -1;
  // A prefill to continue (vLLM's continue_final_message, or an Anthropic
  // request whose last message is the assistant's): the answer's first
  // `first_token` tokens are taken as given and the rest generated, so a
  // continued answer reads exactly as the whole one.
  std::size_t first_token = 0;
  // demo.vary_text: the text starts at another word for every request, as
  // a sampled answer differs from one request to the next.
  std::size_t word_shift = 0;
  std::chrono::milliseconds drip{0};  // write the stream one byte at a time, this far apart
  bool garbage = false;               // a 200 event stream whose body is not SSE at all
  // Each OpenAI chat token chunk and Responses delta carries "demo_sent_us":
  // the monotonic clock as it is written, so a client on this machine can
  // tell how long the event spent in transit (what a proxy adds), apart
  // from the engine's own timing jitter.
  bool stamp = false;
  // The answer is one call of a tool named demo_tool, streamed as its
  // arguments ({"text": "<the tokens>"}) a token at a time, as an agent's
  // stream mostly is (every API but completions, streamed or whole).
  bool tool_call = false;
  // The stream's head carries the two dozen fields a hosted provider sends
  // behind its CDN (rate limits, processing time, cookies, tracing), not
  // the three of a local engine: what a proxy parses per request in
  // production.
  bool provider_head = false;
  // Each chat chunk ends with "obfuscation": a string of varying length,
  // as OpenAI's have since 2025 (padding against length side channels).
  bool obfuscation = false;
  // The first this many tokens of the answer are a reasoning model's
  // thinking, in each API's own shape: chat's as DeepSeek's API and
  // llama.cpp's server send it (delta.reasoning_content, with content null;
  // then content with reasoning_content null), a reasoning item with a
  // summary on the Responses API, a thinking block (with its signature) on
  // Anthropic's. Streamed or whole; not with a tool call.
  std::size_t reasoning_tokens = 0;
  // stream_options.continuous_usage_stats (vLLM's, SGLang's): every chat
  // and completions chunk carries the usage so far.
  bool continuous_usage = false;
  // The realistic mode (demo_engine.slots > 0, engine/batch_scheduler.hpp):
  // the prompt's cache blocks, and its sequence in the engine once
  // submitted (whose cached tokens the usage reports).
  std::vector<std::uint64_t> prompt_blocks;
  std::shared_ptr<batch_scheduler::sequence> sequence;
  // Anthropic's prompt caching (/v1/messages with cache_control): what the
  // prompt read from the cache and wrote to it (engine/prompt_cache.hpp).
  prompt_cache_usage cache;
};

// The prompt as the prefix cache sees it: the system prompt and the
// messages (or the Responses input, or the completion prompt) as sent.
std::vector<std::uint64_t> prompt_blocks_of(const json::object& body) {
  std::string text;
  for (const char* key : {"system", "instructions", "messages", "input", "prompt"})
    if (auto* v = body.if_contains(key)) text += json::serialize(*v);
  return batch_scheduler::prompt_blocks(text);
}

std::int64_t json_int(const json::object& o, const char* key, std::int64_t fallback) {
  auto* v = o.if_contains(key);
  if (!v) return fallback;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  if (v->is_double()) {  // out of int64's range (or NaN): no integer, and no UB converting it
    double d = v->get_double();
    return d > -9.2e18 && d < 9.2e18 ? static_cast<std::int64_t>(d) : fallback;
  }
  return fallback;
}

// The last message when it is the assistant's, to continue: its text.
std::optional<std::string> assistant_prefill(const json::object& body) {
  auto* messages = body.if_contains("messages");
  if (!messages || !messages->is_array() || messages->get_array().empty()) return std::nullopt;
  const auto& last = messages->get_array().back();
  if (!last.is_object()) return std::nullopt;
  auto* role = last.get_object().if_contains("role");
  if (!role || !role->is_string() || role->get_string() != "assistant") return std::nullopt;
  auto* content = last.get_object().if_contains("content");
  if (content && content->is_string()) return std::string(content->get_string());
  std::string text;  // (content blocks: their text)
  if (content && content->is_array())
    for (const auto& block : content->get_array())
      if (block.is_object())
        if (auto* t = block.get_object().if_contains("text"); t && t->is_string())
          text += t->get_string();
  return text;
}

// How many of the answer's tokens a prefill already holds: the demo text
// is the same for every request, so a prefill of its first k tokens
// continues at token k (anything else starts afresh). Anthropic continues
// a final assistant message; OpenAI's API only with vLLM's
// continue_final_message.
std::size_t prefilled_tokens(api kind, const json::object& body) {
  auto* flag = body.if_contains("continue_final_message");
  const bool asked = kind == api::messages || (flag && flag->is_bool() && flag->get_bool());
  auto prefill = asked ? assistant_prefill(body) : std::nullopt;
  if (!prefill) return 0;
  std::size_t k = 0, at = 0;
  while (at < prefill->size()) {
    auto token = demo_token(k);
    if (prefill->compare(at, token.size(), token) != 0) return 0;
    at += token.size();
    ++k;
  }
  return k;
}

plan make_plan(api kind, const json::object& body, const config::demo_engine_settings& settings) {
  plan p;
  p.kind = kind;
  if (auto* s = body.if_contains("stream"); s && s->is_bool()) p.stream = s->get_bool();
  if (auto* m = body.if_contains("model"); m && m->is_string())
    p.model = std::string(m->get_string());
  if (auto* so = body.if_contains("stream_options"); so && so->is_object()) {
    if (auto* iu = so->get_object().if_contains("include_usage"); iu && iu->is_bool())
      p.include_usage = iu->get_bool();
    // As vLLM and SGLang: only with include_usage.
    if (auto* cu = so->get_object().if_contains("continuous_usage_stats"); cu && cu->is_bool())
      p.continuous_usage = cu->get_bool() && p.include_usage;
  }
  p.prompt_tokens = estimate_prompt_tokens(body);
  if (settings.slots > 0) p.prompt_blocks = prompt_blocks_of(body);

  json::object knobs;
  if (auto* d = body.if_contains("demo"); d && d->is_object()) knobs = d->get_object();
  std::int64_t natural = json_int(knobs, "tokens", settings.default_output_tokens);
  // Which spellings count depends on the engine being imitated: llama.cpp's
  // server, for one, ignores max_completion_tokens.
  std::int64_t limit = -1;
  bool ignore_limit = false;
  if (auto* v = knobs.if_contains("ignore_limit"); v && v->is_bool()) ignore_limit = v->get_bool();
  for (const char* key : {"max_tokens", "max_completion_tokens", "max_output_tokens"}) {
    if (ignore_limit) break;
    if (settings.honour_limit != "any" && settings.honour_limit != key &&
        std::string_view(key) != "max_output_tokens")
      continue;
    auto v = json_int(body, key, -1);
    if (v >= 0 && (limit < 0 || v < limit)) limit = v;
  }
  p.first_token = prefilled_tokens(kind, body);
  p.output_tokens = static_cast<std::size_t>(std::max<std::int64_t>(natural, 0));
  p.output_tokens -= std::min(p.output_tokens, p.first_token);  // (what is left to generate)
  if (limit >= 0 && static_cast<std::size_t>(limit) < p.output_tokens) {
    p.output_tokens = static_cast<std::size_t>(limit);
    p.hit_limit = true;
  }
  double prefill_ms = settings.prefill_base.count() + settings.prefill_ms_per_1k_tokens *
                                                          static_cast<double>(p.prompt_tokens) /
                                                          1000.0;
  p.ttft = std::chrono::microseconds(static_cast<std::int64_t>(
      1000 * (knobs.contains("ttft_ms") ? json_int(knobs, "ttft_ms", 0) : prefill_ms)));
  double interval_ms = knobs.contains("interval_ms")
                           ? static_cast<double>(json_int(knobs, "interval_ms", 0))
                           : 1000.0 / settings.decode_tokens_per_second;
  p.interval = std::chrono::microseconds(static_cast<std::int64_t>(1000 * interval_ms));
  p.reset_after = json_int(knobs, "reset_after", -1);
  p.stall_after = json_int(knobs, "stall_after", -1);
  p.error_after = json_int(knobs, "error_after", -1);
  p.drip =
      std::chrono::milliseconds(std::clamp<std::int64_t>(json_int(knobs, "drip_ms", 0), 0, 10000));
  if (auto* g = knobs.if_contains("garbage"); g && g->is_bool()) p.garbage = g->get_bool();
  if (auto* s = knobs.if_contains("stamp"); s && s->is_bool()) p.stamp = s->get_bool();
  if (auto* t = knobs.if_contains("tool_call"); t && t->is_bool())
    p.tool_call = t->get_bool() && kind != api::completions;
  if (auto* h = knobs.if_contains("provider_head"); h && h->is_bool())
    p.provider_head = h->get_bool();
  if (auto* o = knobs.if_contains("obfuscation"); o && o->is_bool()) p.obfuscation = o->get_bool();
  if (kind != api::completions && !p.tool_call)
    p.reasoning_tokens = std::min(p.output_tokens, static_cast<std::size_t>(std::max<std::int64_t>(
                                                       json_int(knobs, "reasoning_tokens", 0), 0)));
  return p;
}

// What a broken engine might send instead of events: binary, HTML, a NUL.
// (A function, not a literal in the coroutine: GCC 12 mishandles arrays there.)
std::string garbage_bytes() {
  static constexpr char junk[] = "\x89PNG\r\n\x1a\n<html>upstream exploded</html>\x00\xff";
  return std::string(junk, sizeof junk - 1);
}

// A stream's head as a hosted provider behind a CDN writes one: the shape
// and sizes of OpenAI's (field names as they send them), the values made up.
// (A function, not a literal in the coroutine, as above.)
std::string provider_stream_head() {
  return "HTTP/1.1 200 OK\r\n"
         "Date: Wed, 02 Dec 2026 12:00:00 GMT\r\n"
         "Content-Type: text/event-stream; charset=utf-8\r\n"
         "Transfer-Encoding: chunked\r\n"
         "Connection: keep-alive\r\n"
         "access-control-expose-headers: X-Request-ID\r\n"
         "openai-organization: user-demo0000000000000000000\r\n"
         "openai-processing-ms: 187\r\n"
         "openai-project: proj_demo00000000000000000000\r\n"
         "openai-version: 2020-10-01\r\n"
         "x-envoy-upstream-service-time: 191\r\n"
         "x-ratelimit-limit-requests: 10000\r\n"
         "x-ratelimit-limit-tokens: 30000000\r\n"
         "x-ratelimit-remaining-requests: 9999\r\n"
         "x-ratelimit-remaining-tokens: 29999985\r\n"
         "x-ratelimit-reset-requests: 6ms\r\n"
         "x-ratelimit-reset-tokens: 0s\r\n"
         "x-request-id: req_0123456789abcdef0123456789abcdef\r\n"
         "strict-transport-security: max-age=31536000; includeSubDomains; preload\r\n"
         "cf-cache-status: DYNAMIC\r\n"
         "Set-Cookie: "
         "__cf_bm=demo0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ-1796256000-1.0.1.1-"
         "demo0123456789abcdefghijklmnopqrstuvwxyz; path=/; expires=Wed, 02-Dec-26 12:30:00 GMT; "
         "domain=.api.example.com; HttpOnly; Secure; SameSite=None\r\n"
         "X-Content-Type-Options: nosniff\r\n"
         "Set-Cookie: "
         "_cfuvid=demo0123456789abcdefghijklmnopqrstuvwxyz0123-1796256000000-0.0.1.1-604800000; "
         "path=/; domain=.api.example.com; HttpOnly; Secure; SameSite=None\r\n"
         "Server: cloudflare\r\n"
         "CF-RAY: 8e0123456789abcd-AMS\r\n"
         "alt-svc: h3=\":443\"; ma=86400\r\n"
         "\r\n";
}

std::string finish_reason(const plan& p) {
  if (p.kind == api::responses)
    return p.hit_limit ? "incomplete" : "completed";  // (a status, not a reason)
  if (p.kind == api::messages)
    return p.hit_limit ? "max_tokens" : p.tool_call ? "tool_use" : "end_turn";
  return p.hit_limit ? "length" : p.tool_call ? "tool_calls" : "stop";
}

// Token i of `count` as a fragment of the tool call's arguments, which
// together read {"text": "<the tokens>"}.
std::string argument_fragment(std::size_t i, std::size_t count) {
  auto quoted = json::serialize(json::string(demo_token(i)));
  std::string out = i == 0 ? R"({"text": ")" : "";
  out.append(quoted, 1, quoted.size() - 2);
  if (i + 1 == count) out += "\"}";
  return out;
}

json::object openai_usage(const plan& p, std::size_t produced) {
  json::object usage{{"prompt_tokens", p.prompt_tokens},
                     {"completion_tokens", produced},
                     {"total_tokens", p.prompt_tokens + produced}};
  if (p.sequence) usage["prompt_tokens_details"] = {{"cached_tokens", p.sequence->cached_tokens}};
  // (as OpenAI's reasoning models: part of completion_tokens, told apart)
  if (p.reasoning_tokens > 0)
    usage["completion_tokens_details"] = {
        {"reasoning_tokens", std::min(p.reasoning_tokens, produced)}};
  return usage;
}

// An Anthropic usage object: with the cache's counts when the request
// marked breakpoints (input_tokens is then what neither read nor wrote).
json::object anthropic_usage(const plan& p, std::size_t output) {
  json::object usage;
  if (p.cache.marked) {
    usage["input_tokens"] = p.cache.uncached();
    usage["cache_creation_input_tokens"] = p.cache.written;
    usage["cache_read_input_tokens"] = p.cache.read;
  } else {
    usage["input_tokens"] = p.prompt_tokens;
  }
  usage["output_tokens"] = output;
  return usage;
}

class generator {
 public:
  generator(tcp::socket& socket, const plan& p, std::uint64_t id, demo_stats& stats)
      : socket_(socket),
        plan_(p),
        stats_(stats),
        id_("demo-" + std::to_string(id)),
        created_(std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count()) {}

  // Streams the answer as server-sent events. Returns false if the
  // connection was reset on purpose (reset_after).
  net::awaitable<bool> stream() {
    if (plan_.provider_head)
      co_await write_raw(provider_stream_head());
    else
      co_await write_raw(
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
          "Transfer-Encoding: chunked\r\n\r\n");
    co_await token_ready(0, plan_.ttft);
    if (plan_.garbage) {  // a broken engine: bytes that are no event stream
      co_await write_chunk(garbage_bytes());
      co_await write_raw("0\r\n\r\n");
      co_return true;
    }
    std::string events = opening_events();
    for (std::size_t i = 0; i < plan_.output_tokens; ++i) {
      if (plan_.reset_after >= 0 && static_cast<long>(i) == plan_.reset_after) {
        reset_connection();
        co_return false;
      }
      if (plan_.stall_after >= 0 && static_cast<long>(i) == plan_.stall_after) {
        if (!events.empty()) co_await write_chunk(events);
        co_await sleep(std::chrono::minutes(10));  // (until the client leaves)
        co_return false;
      }
      if (plan_.error_after >= 0 && static_cast<long>(i) == plan_.error_after) {
        co_await write_chunk(events + error_event());
        co_await write_raw("0\r\n\r\n");
        co_return true;
      }
      events += token_event(i);
      co_await write_chunk(events);
      events.clear();
      if (i + 1 < plan_.output_tokens) co_await token_ready(i + 1, plan_.interval);
    }
    co_await write_chunk(closing_events());
    co_await write_raw("0\r\n\r\n");
    co_return true;
  }

  // A whole answer's faults, met where token `at` would be generated: a
  // stall (no answer at all) or an engine error (a 500 in the API's
  // shape). False: the answer ends here. (A reset cuts the answer itself:
  // respond_whole.)
  net::awaitable<bool> whole_fault() {
    auto at = [](long n) { return n >= 0 ? static_cast<std::size_t>(n) : SIZE_MAX; };
    auto first = std::min(at(plan_.stall_after), at(plan_.error_after));
    if (first == SIZE_MAX || first >= plan_.output_tokens) co_return true;
    co_await token_ready(first, plan_.ttft + plan_.interval * first);
    if (first == at(plan_.stall_after)) {
      co_await sleep(std::chrono::minutes(10));  // (until the client leaves)
    } else {
      auto event = error_event();
      auto json = event.substr(event.find("data: ") + 6);
      json.erase(json.find_last_not_of('\n') + 1);
      co_await write_raw(
          "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
          "Content-Length: " +
          std::to_string(json.size()) + "\r\n\r\n" + json);
    }
    co_return false;
  }

  // Waits as long as the whole answer would take, then sends it at once;
  // with reset_after, its head and the part of its body that many tokens
  // in, then a reset (a truncated answer).
  net::awaitable<bool> respond_whole() {
    if (!co_await whole_fault()) co_return false;
    const auto last = plan_.output_tokens ? plan_.output_tokens - 1 : 0;
    co_await token_ready(last, plan_.ttft + plan_.interval * last);
    auto text_body = json::serialize(whole_body());
    auto answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(text_body.size()) + "\r\n\r\n";
    if (plan_.reset_after >= 0 &&
        static_cast<std::size_t>(plan_.reset_after) < plan_.output_tokens) {
      co_await write_raw(
          answer + text_body.substr(0, text_body.size() * plan_.reset_after / plan_.output_tokens));
      reset_connection();
      co_return false;
    }
    co_await write_raw(answer + text_body);
    co_return true;
  }

  json::object whole_body() {
    std::string text = answer_text();
    json::object body;
    if (plan_.kind == api::responses) {
      auto status = plan_.hit_limit ? "incomplete" : "completed";
      body = response_object(
          responses_output(plan_.tool_call ? call_item(status) : message_item(text, status)),
          responses_usage());
    } else if (plan_.kind == api::messages) {
      json::object block{{"type", "text"}, {"text", text}};
      if (plan_.tool_call)
        block = {{"type", "tool_use"},
                 {"id", "toolu_" + id_},
                 {"name", "demo_tool"},
                 {"input", {{"text", text}}}};
      json::array content;
      if (plan_.reasoning_tokens > 0)
        content.push_back(json::object{
            {"type", "thinking"}, {"thinking", reasoning_text()}, {"signature", signature()}});
      content.push_back(std::move(block));
      body = {{"id", "msg_" + id_},
              {"type", "message"},
              {"role", "assistant"},
              {"model", plan_.model},
              {"content", std::move(content)},
              {"stop_reason", finish_reason(plan_)},
              {"stop_sequence", nullptr},
              {"usage", anthropic_usage(plan_, plan_.output_tokens)}};
    } else if (plan_.kind == api::completions) {
      body = {{"id", "cmpl-" + id_},
              {"object", "text_completion"},
              {"created", created_},
              {"model", plan_.model},
              {"choices", json::array{json::object{{"index", 0},
                                                   {"text", text},
                                                   {"logprobs", nullptr},
                                                   {"finish_reason", finish_reason(plan_)}}}},
              {"usage", openai_usage(plan_, plan_.output_tokens)}};
    } else {
      body = {{"id", "chatcmpl-" + id_},
              {"object", "chat.completion"},
              {"created", created_},
              {"model", plan_.model},
              {"choices", json::array{json::object{{"index", 0},
                                                   {"message", whole_chat_message(text)},
                                                   {"finish_reason", finish_reason(plan_)}}}},
              {"usage", openai_usage(plan_, plan_.output_tokens)}};
    }
    return body;
  }

  // A whole chat answer's message: its text, or the call of demo_tool.
  json::object whole_chat_message(std::string_view text) {
    if (!plan_.tool_call && plan_.reasoning_tokens > 0)
      return {{"role", "assistant"}, {"content", text}, {"reasoning_content", reasoning_text()}};
    if (!plan_.tool_call) return {{"role", "assistant"}, {"content", text}};
    std::string arguments;
    for (std::size_t i = 0; i < plan_.output_tokens; ++i)
      arguments += argument_fragment(i, plan_.output_tokens);
    json::object call{{"id", "call_" + id_},
                      {"type", "function"},
                      {"function", {{"name", "demo_tool"}, {"arguments", arguments}}}};
    return {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array{call}}};
  }

 private:
  static std::string sse(std::string_view event, const json::object& data) {
    std::string out;
    if (!event.empty()) out.append("event: ").append(event).append("\n");
    return out.append("data: ").append(json::serialize(data)).append("\n\n");
  }

  std::string opening_events() {
    if (plan_.kind == api::messages) {
      json::object message{{"id", "msg_" + id_},       {"type", "message"},
                           {"role", "assistant"},      {"content", json::array{}},
                           {"model", plan_.model},     {"stop_reason", nullptr},
                           {"stop_sequence", nullptr}, {"usage", anthropic_usage(plan_, 1)}};
      json::object block{{"type", "text"}, {"text", ""}};
      if (plan_.reasoning_tokens > 0)
        block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
      if (plan_.tool_call)
        block = {{"type", "tool_use"},
                 {"id", "toolu_" + id_},
                 {"name", "demo_tool"},
                 {"input", json::object{}}};
      return sse("message_start", {{"type", "message_start"}, {"message", message}}) +
             sse("content_block_start", {{"type", "content_block_start"},
                                         {"index", 0},
                                         {"content_block", std::move(block)}}) +
             sse("ping", {{"type", "ping"}});
    }
    if (plan_.kind == api::completions) return {};
    if (plan_.kind == api::responses) {
      auto in_progress = response_object(json::array{}, nullptr);
      in_progress["status"] = "in_progress";
      in_progress["incomplete_details"] = nullptr;
      // (One statement each: the events are numbered in the order written.)
      std::string out = numbered("response.created", {{"response", in_progress}});
      out += numbered("response.in_progress", {{"response", in_progress}});
      if (plan_.tool_call)
        return out + numbered("response.output_item.added",
                              {{"output_index", 0}, {"item", call_item("in_progress")}});
      if (plan_.reasoning_tokens > 0) {
        out += numbered("response.output_item.added",
                        {{"output_index", 0}, {"item", reasoning_item(false)}});
        return out +
               numbered("response.reasoning_summary_part.added", {{"item_id", "rs_" + id_},
                                                                  {"output_index", 0},
                                                                  {"summary_index", 0},
                                                                  {"part", summary_part("")}});
      }
      return out + message_opening();
    }
    if (plan_.tool_call)  // the call's id and name first, its arguments after
      return sse("", chat_chunk({{"role", "assistant"},
                                 {"content", nullptr},
                                 {"tool_calls",
                                  json::array{json::object{
                                      {"index", 0},
                                      {"id", "call_" + id_},
                                      {"type", "function"},
                                      {"function", {{"name", "demo_tool"}, {"arguments", ""}}}}}}},
                                nullptr));
    // OpenAI sends the role first, with empty content: not yet a token.
    return sse("", chat_chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
  }

  std::string token_event(std::size_t i) {
    auto token = demo_token(plan_.word_shift + plan_.first_token + i);
    if (plan_.kind != api::chat && plan_.reasoning_tokens > 0) {
      if (i < plan_.reasoning_tokens) return reasoning_delta(token);
      if (i == plan_.reasoning_tokens) return reasoning_to_text() + text_delta(token, i);
    }
    return text_delta(token, i);
  }

  // Token i of an answer that is text (or a call's arguments), not thinking.
  std::string text_delta(std::string_view token, std::size_t i) {
    if (plan_.kind == api::messages && plan_.tool_call)
      return sse("content_block_delta",
                 {{"type", "content_block_delta"},
                  {"index", 0},
                  {"delta",
                   {{"type", "input_json_delta"},
                    {"partial_json", argument_fragment(i, plan_.output_tokens)}}}});
    if (plan_.kind == api::messages)
      return sse("content_block_delta", {{"type", "content_block_delta"},
                                         {"index", text_index()},
                                         {"delta", {{"type", "text_delta"}, {"text", token}}}});
    if (plan_.kind == api::completions) {
      auto chunk = completion_chunk(token, nullptr);
      if (plan_.continuous_usage) chunk["usage"] = openai_usage(plan_, i + 1);
      return sse("", chunk);
    }
    if (plan_.kind == api::responses && plan_.tool_call)
      return numbered("response.function_call_arguments.delta",
                      {{"item_id", "fc_" + id_},
                       {"output_index", 0},
                       {"delta", argument_fragment(i, plan_.output_tokens)}});
    if (plan_.kind == api::responses) {
      json::object fields{{"item_id", "msg_" + id_},
                          {"output_index", text_index()},
                          {"content_index", 0},
                          {"delta", token},
                          {"logprobs", json::array{}}};
      if (plan_.stamp) fields["demo_sent_us"] = sent_us();
      return numbered("response.output_text.delta", std::move(fields));
    }
    auto chunk = chat_chunk(chat_token_delta(i, token), nullptr);
    if (plan_.continuous_usage) chunk["usage"] = openai_usage(plan_, i + 1);
    if (plan_.stamp) chunk["demo_sent_us"] = sent_us();
    return sse("", chunk);
  }

  // An overloaded engine's in-band error, in the API's shape.
  std::string error_event() {
    if (plan_.kind == api::messages)
      return sse("error", {{"type", "error"},
                           {"error", {{"type", "overloaded_error"}, {"message", "Overloaded"}}}});
    if (plan_.kind == api::responses)
      return numbered("error", {{"code", "server_error"}, {"message", "the demo engine failed"}});
    return sse("", {{"error",
                     {{"message", "the demo engine failed"},
                      {"type", "server_error"},
                      {"code", "server_error"}}}});
  }

  std::string closing_events() {
    // (An answer that is all thinking still ends with its text, empty.)
    std::string out;
    if (plan_.kind != api::chat && plan_.reasoning_tokens > 0 &&
        plan_.reasoning_tokens == plan_.output_tokens)
      out = reasoning_to_text();
    return out + closing_of_answer();
  }

  std::string closing_of_answer() {
    auto reason = finish_reason(plan_);
    if (plan_.kind == api::messages) {
      // (Anthropic's message_delta repeats the input counts; without a
      // breakpoint the engine keeps to the output's, as it always has.)
      json::object usage{{"output_tokens", plan_.output_tokens}};
      if (plan_.cache.marked) usage = anthropic_usage(plan_, plan_.output_tokens);
      return sse("content_block_stop", {{"type", "content_block_stop"}, {"index", text_index()}}) +
             sse("message_delta", {{"type", "message_delta"},
                                   {"delta", {{"stop_reason", reason}, {"stop_sequence", nullptr}}},
                                   {"usage", std::move(usage)}}) +
             sse("message_stop", {{"type", "message_stop"}});
    }
    if (plan_.kind == api::responses && plan_.tool_call) {
      auto item = call_item(plan_.hit_limit ? "incomplete" : "completed");
      std::string out = numbered(
          "response.function_call_arguments.done",
          {{"item_id", "fc_" + id_}, {"output_index", 0}, {"arguments", item.at("arguments")}});
      out += numbered("response.output_item.done", {{"output_index", 0}, {"item", item}});
      auto end = plan_.hit_limit ? "response.incomplete" : "response.completed";
      return out +
             numbered(end, {{"response", response_object(json::array{item}, responses_usage())}});
    }
    if (plan_.kind == api::responses) {
      std::string text = answer_text();
      // A stop at max_output_tokens ends with response.incomplete, as OpenAI's does.
      auto item = message_item(text, plan_.hit_limit ? "incomplete" : "completed");
      auto end = plan_.hit_limit ? "response.incomplete" : "response.completed";
      std::string out = numbered("response.output_text.done", {{"item_id", "msg_" + id_},
                                                               {"output_index", text_index()},
                                                               {"content_index", 0},
                                                               {"text", text},
                                                               {"logprobs", json::array{}}});
      out += numbered("response.content_part.done", {{"item_id", "msg_" + id_},
                                                     {"output_index", text_index()},
                                                     {"content_index", 0},
                                                     {"part", text_part(text)}});
      out +=
          numbered("response.output_item.done", {{"output_index", text_index()}, {"item", item}});
      out +=
          numbered(end, {{"response", response_object(responses_output(item), responses_usage())}});
      return out;
    }
    std::string out = plan_.kind == api::completions
                          ? sse("", completion_chunk("", json::string(reason)))
                          : sse("", chat_chunk(json::object{}, json::string(reason)));
    if (plan_.include_usage) {
      json::object usage_chunk{
          {"id", (plan_.kind == api::completions ? "cmpl-" : "chatcmpl-") + id_},
          {"object", plan_.kind == api::completions ? "text_completion" : "chat.completion.chunk"},
          {"created", created_},
          {"model", plan_.model},
          {"choices", json::array{}},
          {"usage", openai_usage(plan_, plan_.output_tokens)}};
      out += sse("", usage_chunk);
    }
    return out + "data: [DONE]\n\n";
  }

  json::object chat_token_delta(std::size_t i, std::string_view token) {
    if (plan_.tool_call)
      return {{"tool_calls",
               json::array{json::object{
                   {"index", 0},
                   {"function", {{"arguments", argument_fragment(i, plan_.output_tokens)}}}}}}};
    if (i < plan_.reasoning_tokens) return {{"content", nullptr}, {"reasoning_content", token}};
    if (plan_.reasoning_tokens > 0) return {{"content", token}, {"reasoning_content", nullptr}};
    return {{"content", token}};
  }

  // The answer's tokens from..to, as text.
  std::string tokens_text(std::size_t from, std::size_t to) const {
    std::string text;
    for (std::size_t i = from; i < to; ++i)
      text += demo_token(plan_.word_shift + plan_.first_token + i);
    return text;
  }
  std::string reasoning_text() const { return tokens_text(0, plan_.reasoning_tokens); }
  std::string answer_text() const {
    return tokens_text(plan_.reasoning_tokens, plan_.output_tokens);
  }

  // Where the answer's text goes: the Responses output item or Anthropic
  // content block after the reasoning's, when there is reasoning.
  std::size_t text_index() const { return plan_.reasoning_tokens > 0 ? 1 : 0; }

  // What an Anthropic thinking block is signed with (opaque to clients;
  // made up, and the same for the same thinking).
  std::string signature() const {
    return "demo-signature-" + std::to_string(std::hash<std::string>{}(reasoning_text()));
  }

  // A token of thinking: a summary text delta, or a thinking delta.
  std::string reasoning_delta(std::string_view token) {
    if (plan_.kind == api::messages)
      return sse("content_block_delta",
                 {{"type", "content_block_delta"},
                  {"index", 0},
                  {"delta", {{"type", "thinking_delta"}, {"thinking", token}}}});
    return numbered(
        "response.reasoning_summary_text.delta",
        {{"item_id", "rs_" + id_}, {"output_index", 0}, {"summary_index", 0}, {"delta", token}});
  }

  // The thinking done, the text begins: the thinking block signed and
  // closed and a text block opened (Anthropic), or the reasoning item
  // closed and the message item opened (Responses).
  std::string reasoning_to_text() {
    if (plan_.kind == api::messages)
      return sse("content_block_delta",
                 {{"type", "content_block_delta"},
                  {"index", 0},
                  {"delta", {{"type", "signature_delta"}, {"signature", signature()}}}}) +
             sse("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}) +
             sse("content_block_start", {{"type", "content_block_start"},
                                         {"index", 1},
                                         {"content_block", {{"type", "text"}, {"text", ""}}}});
    auto thought = reasoning_text();
    std::string out = numbered(
        "response.reasoning_summary_text.done",
        {{"item_id", "rs_" + id_}, {"output_index", 0}, {"summary_index", 0}, {"text", thought}});
    out += numbered("response.reasoning_summary_part.done", {{"item_id", "rs_" + id_},
                                                             {"output_index", 0},
                                                             {"summary_index", 0},
                                                             {"part", summary_part(thought)}});
    out += numbered("response.output_item.done",
                    {{"output_index", 0}, {"item", reasoning_item(true)}});
    return out + message_opening();
  }

  // The Responses message item opened, with its one output_text part.
  std::string message_opening() {
    std::string out =
        numbered("response.output_item.added",
                 {{"output_index", text_index()}, {"item", message_item("", "in_progress")}});
    return out + numbered("response.content_part.added", {{"item_id", "msg_" + id_},
                                                          {"output_index", text_index()},
                                                          {"content_index", 0},
                                                          {"part", text_part("")}});
  }

  static json::object summary_part(std::string_view text) {
    return {{"type", "summary_text"}, {"text", text}};
  }

  json::object reasoning_item(bool done) {
    json::array summary;
    if (done) summary.push_back(summary_part(reasoning_text()));
    return {{"id", "rs_" + id_}, {"type", "reasoning"}, {"summary", std::move(summary)}};
  }

  // A Responses output: the reasoning item (when there is one), then `last`.
  json::array responses_output(json::object last) {
    json::array output;
    if (plan_.reasoning_tokens > 0) output.push_back(reasoning_item(true));
    output.push_back(std::move(last));
    return output;
  }

  json::object chat_chunk(json::object delta, json::value finish) {
    json::object chunk{
        {"id", "chatcmpl-" + id_},
        {"object", "chat.completion.chunk"},
        {"created", created_},
        {"model", plan_.model},
        {"choices",
         json::array{json::object{
             {"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish)}}}}};
    if (plan_.obfuscation) chunk["obfuscation"] = padding();
    return chunk;
  }

  // A different length each time, 1 to 16 characters (OpenAI's vary so).
  std::string padding() {
    static constexpr std::string_view alphabet = "aZ3kQ9xP2mT7bW5v";
    std::string out;
    for (std::size_t i = 0, n = 1 + (padding_count_++ * 7) % 16; i < n; ++i)
      out += alphabet[(padding_count_ + i) % 16];
    return out;
  }

  // OpenAI's Responses API: every event named twice (its `event:` line and
  // its `type`) and numbered in order from 0; the answer is one message
  // item with one output_text part.
  std::string numbered(std::string_view type, json::object fields) {
    json::object data{{"type", type}, {"sequence_number", sequence_++}};
    for (auto& [k, v] : fields) data[k] = std::move(v);
    return sse(type, data);
  }

  json::object text_part(std::string_view text) {
    return {{"type", "output_text"},
            {"annotations", json::array{}},
            {"logprobs", json::array{}},
            {"text", text}};
  }

  json::object message_item(std::string_view text, std::string_view status) {
    json::array content;
    if (status != "in_progress") content.push_back(text_part(text));
    return {{"id", "msg_" + id_},
            {"type", "message"},
            {"status", status},
            {"content", std::move(content)},
            {"role", "assistant"}};
  }

  // The Responses API's call of demo_tool: its arguments whole once done.
  json::object call_item(std::string_view status) {
    std::string arguments;
    if (status != "in_progress")
      for (std::size_t i = 0; i < plan_.output_tokens; ++i)
        arguments += argument_fragment(i, plan_.output_tokens);
    return {{"id", "fc_" + id_},      {"type", "function_call"},  {"status", status},
            {"arguments", arguments}, {"call_id", "call_" + id_}, {"name", "demo_tool"}};
  }

  json::object responses_usage() {
    return {{"input_tokens", plan_.prompt_tokens},
            {"input_tokens_details", {{"cached_tokens", 0}}},
            {"output_tokens", plan_.output_tokens},
            {"output_tokens_details", {{"reasoning_tokens", plan_.reasoning_tokens}}},
            {"total_tokens", plan_.prompt_tokens + plan_.output_tokens}};
  }

  json::object response_object(json::value output, json::value usage) {
    json::value incomplete = nullptr;
    if (plan_.hit_limit) incomplete = json::object{{"reason", "max_output_tokens"}};
    return {{"id", "resp_" + id_},      {"object", "response"},
            {"created_at", created_},   {"status", finish_reason(plan_)},
            {"error", nullptr},         {"incomplete_details", std::move(incomplete)},
            {"model", plan_.model},     {"output", std::move(output)},
            {"usage", std::move(usage)}};
  }

  json::object completion_chunk(std::string_view text, json::value finish) {
    return {{"id", "cmpl-" + id_},
            {"object", "text_completion"},
            {"created", created_},
            {"model", plan_.model},
            {"choices", json::array{json::object{{"index", 0},
                                                 {"text", text},
                                                 {"logprobs", nullptr},
                                                 {"finish_reason", std::move(finish)}}}}};
  }

  // The stamp of a token event (plan::stamp): the monotonic clock now.
  static std::int64_t sent_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(clock::now().time_since_epoch())
        .count();
  }

  // Token `i` generated: by the engine's scheduler in the realistic mode,
  // else after `alone` (this request's own clock).
  net::awaitable<void> token_ready(std::size_t i, std::chrono::microseconds alone) {
    if (plan_.sequence)
      co_await plan_.sequence->owner->wait_for_token(*plan_.sequence, static_cast<long long>(i));
    else
      co_await sleep(alone);
  }

  net::awaitable<void> sleep(std::chrono::microseconds d) {
    if (d.count() <= 0) co_return;
    net::steady_timer timer(socket_.get_executor(), d);
    co_await timer.async_wait(net::use_awaitable);  // throws when cancelled: the client left
  }

  net::awaitable<void> write_raw(std::string bytes) {
    co_await net::async_write(socket_, net::buffer(bytes), net::use_awaitable);
  }

  net::awaitable<void> write_chunk(const std::string& payload) {
    if (plan_.drip.count() > 0) {  // a trickling engine: one byte per chunk
      for (char c : payload) {
        std::string one = std::string("1\r\n") + c + "\r\n";
        co_await net::async_write(socket_, net::buffer(one), net::use_awaitable);
        co_await sleep(plan_.drip);
      }
      stats_.bytes_streamed += payload.size();
      co_return;
    }
    std::array<char, 32> size;
    int n = std::snprintf(size.data(), size.size(), "%zx\r\n", payload.size());
    std::array<net::const_buffer, 3> parts{net::buffer(size.data(), n), net::buffer(payload),
                                           net::buffer("\r\n", 2)};
    co_await net::async_write(socket_, parts, net::use_awaitable);
    stats_.bytes_streamed += payload.size();
  }

  void reset_connection() {
    error_code ignored;
    socket_.set_option(net::socket_base::linger(true, 0), ignored);  // close with RST
    socket_.close(ignored);
  }

  tcp::socket& socket_;
  const plan& plan_;
  demo_stats& stats_;
  std::string id_;
  std::int64_t created_;
  std::size_t sequence_ = 0;       // the Responses API's sequence_number
  std::size_t padding_count_ = 0;  // chunks padded so far (plan::obfuscation)
};

// Completes when the peer closes (or resets) the connection. It only peeks:
// bytes of a next request must stay in the socket for the session to read.
net::awaitable<void> wait_for_close(tcp::socket& socket) {
  for (;;) {
    auto [ec] = co_await socket.async_wait(tcp::socket::wait_read, use_tuple);
    if (ec) co_return;
    char probe;
    auto n = ::recv(socket.native_handle(), &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) co_return;  // closed or reset
    if (n > 0) {
      // The next request is already here, so the peer is alive; wait to be
      // cancelled when this answer is done.
      net::steady_timer forever(socket.get_executor(), std::chrono::hours(24 * 365));
      co_await forever.async_wait(use_tuple);
      co_return;
    }
  }
}

}  // namespace

struct demo_engine::state {
  config::demo_engine_settings settings;
  std::shared_ptr<demo_stats> stats;
  std::uint64_t next_id = 1;
  // The last request as received, shared with its session rather than
  // copied (prompts run to megabytes) and turned into JSON only when
  // /demo/stats asks. Touched only on the engine's thread.
  std::shared_ptr<const http::request<http::string_body>> last_request;
  json::object by_model;  // requests per model name, to check weights
  // Requests seen per fault (demo.fail_times): the first N of each fail.
  std::map<std::string, std::int64_t> fault_counts;
  std::unique_ptr<batch_scheduler> batch;  // the realistic mode (slots > 0)
  std::unique_ptr<prompt_cache> cache;     // Anthropic's prompt caching (/v1/messages)
};

namespace {

// (`retry_after`: the Retry-After field's value; none when empty.)
net::awaitable<void> write_json(tcp::socket& socket, http::status status, const json::value& body,
                                bool keep_alive, std::string retry_after = {}) {
  http::response<http::empty_body> res{status, 11};
  res.set(http::field::content_type, "application/json");
  if (!retry_after.empty()) res.set(http::field::retry_after, retry_after);
  const auto text = json::serialize(body);
  res.content_length(text.size());
  res.keep_alive(keep_alive);
  const auto head = head_bytes(res.base());
  const std::array<net::const_buffer, 2> pieces{net::buffer(head), net::buffer(text)};
  co_await net::async_write(socket, pieces, use_tuple);
}

// GET /metrics: Prometheus text (vLLM's names in the realistic mode).
net::awaitable<void> write_text(tcp::socket& socket, std::string text, bool keep_alive) {
  http::response<http::empty_body> res{http::status::ok, 11};
  res.set(http::field::content_type, "text/plain; version=0.0.4");
  res.content_length(text.size());
  res.keep_alive(keep_alive);
  const auto head = head_bytes(res.base());
  const std::array<net::const_buffer, 2> pieces{net::buffer(head), net::buffer(text)};
  co_await net::async_write(socket, pieces, use_tuple);
}

json::object error_body(std::string_view message, std::string_view type) {
  return {{"error", {{"message", message}, {"type", type}, {"code", nullptr}}}};
}

// An error as Anthropic's API writes one (on /v1/messages).
json::object anthropic_error_body(std::string_view message, int status) {
  std::string_view type = status == 429   ? "rate_limit_error"
                          : status == 529 ? "overloaded_error"
                          : status >= 500 ? "api_error"
                                          : "invalid_request_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

json::object request_json(const http::request<http::string_body>& req) {
  json::object headers;
  for (const auto& f : req) headers[std::string(f.name_string())] = std::string(f.value());
  return {{"method", std::string(req.method_string())},
          {"target", std::string(req.target())},
          {"headers", std::move(headers)},
          {"body", req.body()}};
}

json::object stats_json(const demo_engine::state& st) {
  const auto& s = *st.stats;
  return {{"requests", s.requests.load()},
          {"completed", s.completed.load()},
          {"cancelled", s.cancelled.load()},
          {"resets", s.resets.load()},
          {"active", s.active.load()},
          {"tokens_asked", s.tokens_asked.load()},
          {"last_cancel_ns", s.last_cancel_ns.load()},
          {"last_request", st.last_request ? request_json(*st.last_request) : json::object()},
          {"by_model", st.by_model}};
}

// The engine's slot and KV back, however a generation ends.
class release_at_end {
 public:
  explicit release_at_end(const plan& p) : p_(p) {}
  ~release_at_end() {
    if (p_.sequence) p_.sequence->owner->release(*p_.sequence);
  }

 private:
  const plan& p_;
};

// Runs one generation while watching the socket; returns whether the
// connection can be kept.
net::awaitable<bool> generate(tcp::socket& socket, demo_engine::state& st, const plan& p) {
  using namespace net::experimental::awaitable_operators;
  auto& stats = *st.stats;
  generator gen(socket, p, st.next_id++, stats);
  stats.active++;
  release_at_end release(p);
  stats.tokens_asked += p.prompt_tokens + p.output_tokens;
  bool keep = true;
  try {
    auto produce = [&]() -> net::awaitable<bool> {
      if (p.stream) co_return co_await gen.stream();
      co_return co_await gen.respond_whole();
    };
    auto result = co_await (produce() || wait_for_close(socket));
    if (result.index() == 0) {
      if (std::get<0>(result))
        stats.completed++;
      else {
        stats.resets++;
        keep = false;
      }
    } else {
      stats.last_cancel_ns = clock::now().time_since_epoch().count();
      stats.cancelled++;
      keep = false;
    }
  } catch (const std::exception&) {
    // A write failed: the client left while we were sending.
    stats.last_cancel_ns = clock::now().time_since_epoch().count();
    stats.cancelled++;
    keep = false;
  }
  stats.active--;
  co_return keep;
}

// JSON built outside coroutines: GCC 12 miscompiles braced initialiser
// lists inside a coroutine body ("array used as initializer").
json::object models_json() {
  json::object model{
      {"id", "demo"}, {"object", "model"}, {"created", 0}, {"owned_by", "tokengate"}};
  return {{"object", "list"}, {"data", json::array{model}}};
}

json::object embeddings_json(const json::object& body) {
  auto tokens = estimate_prompt_tokens(body);
  json::array vector;
  for (int i = 0; i < 8; ++i)
    vector.push_back(static_cast<double>((tokens * 31 + i * 17) % 100) / 100.0);
  return {{"object", "list"},
          {"data",
           json::array{json::object{{"object", "embedding"}, {"index", 0}, {"embedding", vector}}}},
          {"model", body.contains("model") ? body.at("model") : json::value("demo")},
          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

std::optional<api> api_of(std::string_view path) {
  if (path == "/v1/chat/completions") return api::chat;
  if (path == "/v1/completions") return api::completions;
  if (path == "/v1/messages") return api::messages;
  if (path == "/v1/responses") return api::responses;
  return std::nullopt;
}

config::api config_api(api kind) {
  switch (kind) {
    case api::chat:
      return config::api::chat_completions;
    case api::completions:
      return config::api::completions;
    case api::messages:
      return config::api::messages;
    case api::responses:
      break;
  }
  return config::api::responses;
}

// An answer the engine gives instead of a generation.
struct canned {
  http::status status;
  json::object body;
  std::string retry_after;  // the field's value; empty: none
};

// An error in the API's own shape, with OpenAI's `code` where it has one.
canned error_answer(std::optional<api> kind, int status, std::string message,
                    std::string_view code = {}) {
  canned c{static_cast<http::status>(status), {}, {}};
  if (kind == api::messages) {
    c.body = anthropic_error_body(message, status);
  } else {
    std::string_view type = status >= 500 ? "server_error" : "invalid_request_error";
    c.body = error_body(message, type);
    if (!code.empty()) c.body["error"].as_object()["code"] = code;
  }
  if (status == 429) c.retry_after = "1";
  return c;
}

// An API the engine does not serve (settings.apis): the 404 llama.cpp's
// server answers, in OpenAI's error shape.
canned not_served() {
  json::object body{
      {"error", {{"code", 404}, {"message", "File Not Found"}, {"type", "not_found_error"}}}};
  return {http::status::not_found, std::move(body), {}};
}

// demo.fail_times: only the first N requests that carry the same knobs
// meet their fault (a status, or a stream broken after some tokens): a
// transient fault a retry or a resume gets past. Without it, every one.
bool fault_applies(demo_engine::state& st, const json::object& knobs) {
  return !knobs.contains("fail_times") ||
         ++st.fault_counts[json::serialize(knobs)] <= json_int(knobs, "fail_times", 0);
}

// demo.status (with fail_times, see fault_applies); demo.retry_after sets
// a 429's Retry-After (-1: none).
std::optional<canned> status_asked(demo_engine::state& st, const json::object& knobs,
                                   std::optional<api> kind) {
  auto status = json_int(knobs, "status", 0);
  if (status < 400 || status >= 600) return std::nullopt;
  if (!fault_applies(st, knobs)) return std::nullopt;
  auto c = error_answer(kind, static_cast<int>(status),
                        "demo engine asked to fail with " + std::to_string(status));
  if (auto after = json_int(knobs, "retry_after", -2); after >= -1)
    c.retry_after = after < 0 ? "" : std::to_string(after);
  return c;
}

// A prompt longer than the engine's context (settings.context_tokens, or
// demo.context_limit): the 400 each API answers with.
std::optional<canned> context_refusal(const demo_engine::state& st, const json::object& body,
                                      const json::object& knobs, std::optional<api> kind) {
  auto limit = json_int(knobs, "context_limit", st.settings.context_tokens);
  if (limit <= 0) return std::nullopt;
  auto tokens = static_cast<std::int64_t>(estimate_prompt_tokens(body));
  if (tokens <= limit) return std::nullopt;
  if (kind == api::messages)
    return error_answer(kind, 400,
                        "prompt is too long: " + std::to_string(tokens) + " tokens > " +
                            std::to_string(limit) + " maximum");
  return error_answer(kind, 400,
                      "This model's maximum context length is " + std::to_string(limit) +
                          " tokens. However, your messages resulted in " + std::to_string(tokens) +
                          " tokens.",
                      "context_length_exceeded");
}

// A failure the engine was asked for: by its settings (fail_status), by
// its context, or by the request (demo.status, demo.policy_refusal).
std::optional<canned> failure_asked(demo_engine::state& st, const json::object& body,
                                    std::optional<api> kind) {
  if (st.settings.fail_status >= 400) {
    auto c = error_answer(kind, st.settings.fail_status, "demo engine configured to fail");
    if (c.status == http::status::too_many_requests)
      c.retry_after =
          st.settings.fail_retry_after < 0 ? "" : std::to_string(st.settings.fail_retry_after);
    return c;
  }
  json::object knobs;
  if (auto* d = body.if_contains("demo"); d && d->is_object()) knobs = d->get_object();
  if (auto c = status_asked(st, knobs, kind)) return c;
  if (auto c = context_refusal(st, body, knobs, kind)) return c;
  if (auto* p = knobs.if_contains("refuse_prefill");
      p && p->is_bool() && p->get_bool() && assistant_prefill(body))
    return error_answer(kind, 400,
                        "this model does not support assistant message prefill: the final "
                        "message must be the user's");
  if (auto* p = knobs.if_contains("policy_refusal"); p && p->is_bool() && p->get_bool())
    return error_answer(kind, 400, "the request was refused by the demo content policy",
                        "content_policy_violation");
  return std::nullopt;
}

// Anthropic's prompt caching (/v1/messages): the request's reads and
// writes into `out`, or the 400 its marking earns.
std::optional<canned> use_prompt_cache(demo_engine::state& st, const json::object& body,
                                       std::optional<api> kind, prompt_cache_usage& out) {
  if (kind != api::messages) return std::nullopt;
  auto used = st.cache->use(body, prompt_cache::clock::now());
  if (auto* message = std::get_if<std::string>(&used)) return error_answer(kind, 400, *message);
  out = std::get<prompt_cache_usage>(used);
  return std::nullopt;
}

// The knobs of a request whose body cannot carry them (a client whose
// requests tokengate translates: an unknown member is refused there) come
// in an x-demo header, as the same JSON object.
void knobs_from_header(const http::request<http::string_body>& req, json::object& body) {
  auto header = req["x-demo"];
  if (header.empty() || body.contains("demo")) return;
  error_code ec;
  auto knobs = json::parse(std::string_view(header.data(), header.size()), ec);
  if (!ec && knobs.is_object()) body["demo"] = std::move(knobs);
}

// POST /demo/fail {"status": 503}: from now on every generation and
// /health answer with that status; {"status": 0} heals it. (Tests make a
// replica fail mid-run with it.)
std::pair<http::status, json::object> set_failure(demo_engine::state& st, const std::string& body) {
  error_code ec;
  auto v = json::parse(body, ec);
  const auto* status = !ec && v.is_object() ? v.get_object().if_contains("status") : nullptr;
  if (!status || !status->is_int64() || status->get_int64() < 0 || status->get_int64() > 599)
    return {http::status::bad_request,
            error_body("expected {\"status\": 0 or an HTTP status}", "invalid_request_error")};
  st.settings.fail_status = static_cast<int>(status->get_int64());
  return {http::status::ok, json::object{{"fail_status", st.settings.fail_status}}};
}

// What a path that is no generation answers (the probes, the test
// controls, the model list), and the 404s: no such endpoint, or an API
// the engine does not serve. Nothing: a generation (or embeddings) to make.
std::optional<canned> endpoint_answer(demo_engine::state& st,
                                      const http::request<http::string_body>& req,
                                      std::string_view path) {
  const bool get = req.method() == http::verb::get;
  if (get && path == "/health") {  // (what vLLM, SGLang, TGI and llama.cpp answer on)
    if (st.settings.fail_status >= 400)
      return canned{static_cast<http::status>(st.settings.fail_status),
                    error_body("unhealthy", "server_error"),
                    {}};
    return canned{http::status::ok, json::object{{"status", "ok"}}, {}};
  }
  if (req.method() == http::verb::post && path == "/demo/fail") {
    auto set = set_failure(st, req.body());
    return canned{set.first, std::move(set.second), {}};
  }
  if (get && path == "/demo/stats") return canned{http::status::ok, stats_json(st), {}};
  if (get && path == "/v1/models") return canned{http::status::ok, models_json(), {}};
  const auto kind = api_of(path);
  const bool embeddings = path == "/v1/embeddings";
  if (req.method() != http::verb::post || (!kind && !embeddings))
    return canned{
        http::status::not_found, error_body("no such endpoint", "invalid_request_error"), {}};
  if (!st.settings.apis.has(embeddings ? config::api::embeddings : config_api(*kind)))
    return not_served();
  return std::nullopt;
}

// One request answered; returns whether the connection goes on.
net::awaitable<bool> answer(tcp::socket& socket, demo_engine::state& st,
                            const http::request<http::string_body>& req, std::string_view path) {
  const bool keep = req.keep_alive();
  if (req.method() == http::verb::get && path == "/metrics") {
    // (named first: GCC 12 destroys a ?: temporary passed into a coroutine twice)
    auto text = st.batch ? st.batch->prometheus() : std::string();
    co_await write_text(socket, std::move(text), keep);
    co_return keep;
  }
  std::optional<canned> reply = endpoint_answer(st, req, path);
  const auto kind = api_of(path);
  const bool embeddings = path == "/v1/embeddings";
  error_code jec;
  prompt_cache_usage cache_use;
  auto parsed = reply ? json::value() : json::parse(req.body(), jec);
  if (!reply && (jec || !parsed.is_object()))
    reply = canned{http::status::bad_request,
                   error_body("body must be a JSON object", "invalid_request_error"),
                   {}};
  if (!reply) {
    auto& body = parsed.get_object();
    knobs_from_header(req, body);
    if (auto* m = body.if_contains("model"); m && m->is_string()) {
      auto& count = st.by_model[m->get_string()];
      count = count.is_int64() ? count.get_int64() + 1 : 1;
    }
    reply = failure_asked(st, body, kind);
    if (!reply) reply = use_prompt_cache(st, body, kind, cache_use);
    if (!reply && embeddings) {
      st.stats->completed++;
      reply = canned{http::status::ok, embeddings_json(body), {}};
    }
  }
  if (reply) {
    co_await write_json(socket, reply->status, std::move(reply->body), keep,
                        std::move(reply->retry_after));
    co_return keep;
  }
  auto p = make_plan(*kind, parsed.get_object(), st.settings);
  if (cache_use.marked) {
    p.cache = cache_use;
    p.prompt_tokens = cache_use.total;  // (tools included)
  }
  if (auto* d = parsed.get_object().if_contains("demo"); d && d->is_object())
    if (auto* v = d->get_object().if_contains("vary_text"); v && v->is_bool() && v->get_bool())
      p.word_shift = st.stats->requests.load();
  if (p.reset_after >= 0 || p.stall_after >= 0 || p.error_after >= 0)
    if (auto* d = parsed.get_object().if_contains("demo");
        d && d->is_object() && !fault_applies(st, d->get_object()))
      p.reset_after = p.stall_after = p.error_after = -1;
  if (st.batch)
    p.sequence =
        st.batch->submit(std::move(p.prompt_blocks), static_cast<long long>(p.prompt_tokens),
                         static_cast<long long>(p.output_tokens));
  bool generated = co_await generate(socket, st, p);
  co_return generated&& keep;
}

net::awaitable<void> engine_session(tcp::socket socket, std::shared_ptr<demo_engine::state> st) {
  // Beast reads as much as the buffer's free capacity (at least 512 bytes):
  // a buffer left to grow from nothing takes a 200 KB prompt in about 400
  // reads of 512 bytes, which made the engine, not the proxy, the bottleneck
  // of the long-prompt benchmark. Pages are touched only as bytes arrive.
  beast::flat_buffer buffer;
  buffer.reserve(64 * 1024);
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    auto [ec, n] = co_await http::async_read(socket, buffer, parser, use_tuple);
    if (ec) break;
    auto shared = std::make_shared<const http::request<http::string_body>>(parser.release());
    auto target = std::string_view(shared->target());
    auto path = target.substr(0, target.find('?'));
    // (probes and the test controls are not requests)
    if (!path.starts_with("/demo/") && path != "/health" && path != "/metrics") {
      st->stats->requests++;
      st->last_request = shared;
    }
    if (!co_await answer(socket, *st, *shared, path)) break;
  }
  socket.shutdown(tcp::socket::shutdown_both, ignored);
}

net::awaitable<void> accept_loop(tcp::acceptor& acceptor, std::shared_ptr<demo_engine::state> st) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec) {
      if (!acceptor.is_open()) co_return;
      continue;
    }
    net::co_spawn(acceptor.get_executor(), engine_session(std::move(socket), st), net::detached);
  }
}

}  // namespace

demo_engine::demo_engine(config::demo_engine_settings settings)
    : settings_(std::move(settings)), stats_(std::make_shared<demo_stats>()) {
  state_ = std::make_shared<state>();
  state_->settings = settings_;
  state_->stats = stats_;
  state_->cache =
      std::make_unique<prompt_cache>(settings_.prompt_cache_min_tokens, settings_.prompt_cache_ttl);
}

demo_engine::~demo_engine() { stop(); }

void demo_engine::start() {
  tcp::endpoint endpoint(net::ip::make_address(settings_.address), settings_.port);
  acceptor_ = std::make_unique<tcp::acceptor>(io_);
  acceptor_->open(endpoint.protocol());
  acceptor_->set_option(tcp::acceptor::reuse_address(true));
  error_code ec;
  acceptor_->bind(endpoint, ec);
  if (ec)
    throw std::runtime_error("cannot listen on " + settings_.address + ":" +
                             std::to_string(settings_.port) + " (demo engine): " + ec.message());
  acceptor_->listen(net::socket_base::max_listen_connections);
  port_ = acceptor_->local_endpoint().port();
  if (settings_.slots > 0) {
    state_->batch = std::make_unique<batch_scheduler>(io_.get_executor(), settings_);
    state_->batch->start();
  }
  net::co_spawn(io_, accept_loop(*acceptor_, state_), net::detached);
  thread_ = std::thread([this] { io_.run(); });
}

void demo_engine::stop() {
  if (!thread_.joinable()) return;
  io_.stop();
  thread_.join();
}

}  // namespace tokengate::engine
