// Resume in every dialect tokengate streams: an Anthropic messages stream,
// a Responses stream, and streams translated either way, cut after their
// first tokens, reach the client as one stream. The text is the unfailed
// run's, once and in order; the stream has one opening and one finish;
// and it is named as one stream throughout (the first attempt's chunk,
// response and item ids; Responses' sequence numbers consecutive).
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <set>

#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"
#include "support/observed.hpp"
#include "support/proxy_fixture.hpp"

namespace tokengate::test::resume_dialects {
namespace {

namespace json = boost::json;

// The demo engine as an Anthropic upstream and as an OpenAI one; each
// model's route resumes.
fixture_options two_kinds() {
  fixture_options o;
  o.more_upstreams =
      "  as_anthropic: {base_url: \"http://127.0.0.1:{engine}/v1\", kind: anthropic}\n"
      "  as_openai: {base_url: \"http://127.0.0.1:{engine}/v1\", kind: openai}\n";
  o.top_extra =
      "routes:\n"
      "  - {name: claude, models: [claude], targets: [{upstream: as_anthropic}],\n"
      "     retry_backoff: 1ms, resume: {mode: restart}}\n"
      "  - {name: local, models: [local], targets: [{upstream: as_openai}],\n"
      "     retry_backoff: 1ms, resume: {mode: restart}}\n";
  return o;
}

struct event {
  std::string type;
  json::object data;
};

// The body's events, their data parsed ("[DONE]" and the like left out).
std::vector<event> events_of(const std::string& body) {
  struct collect final : stream::sse_sink {
    std::vector<event> events;
    void on_event(const stream::sse_event& e) override {
      boost::system::error_code ec;
      auto v = json::parse(e.data, ec);
      if (!ec && v.is_object()) events.push_back({std::string(e.type), v.get_object()});
    }
  } sink;
  stream::sse_parser p;
  p.feed(body, sink);
  return sink.events;
}

std::string text_of(const stream::stream_facts& facts) {
  return facts.text_by_choice.empty() ? "" : facts.text_by_choice.begin()->second;
}

std::size_t count_of(const std::vector<event>& events, std::string_view type) {
  std::size_t n = 0;
  for (const auto& e : events) n += e.type == type;
  return n;
}

http_response ask(proxy_fixture& f, const std::string& path, const std::string& body,
                  const std::string& knobs) {
  http_client c(f.port());
  c.send(post_json(path, body, "x-demo: " + knobs + "\r\n"));
  return read_response(c, std::chrono::seconds(10));
}

const std::string unfailed = R"({"tokens":12,"ttft_ms":0,"interval_ms":2})";
const std::string cut_once =
    R"({"tokens":12,"ttft_ms":0,"interval_ms":2,"reset_after":5,"fail_times":1})";
const std::string error_once =
    R"({"tokens":12,"ttft_ms":0,"interval_ms":2,"error_after":4,"fail_times":1})";

const std::string messages_body(const std::string& model) {
  return R"({"model":")" + model +
         R"(","max_tokens":300,"stream":true,"messages":[{"role":"user","content":"hi"}]})";
}
const std::string chat_body(const std::string& model) {
  return R"({"model":")" + model +
         R"(","stream":true,"stream_options":{"include_usage":true},)"
         R"("messages":[{"role":"user","content":"hi"}]})";
}
const std::string responses_body = R"({"model":"local","stream":true,"input":"hi"})";

// One Anthropic message: one start, one block opened and closed, the
// text, one stop; the usage one answer's.
void expect_one_message(const http_response& r, const std::string& expected) {
  ASSERT_TRUE(r.complete);
  auto facts = observed(r.body, dialect::anthropic_messages);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(text_of(facts), expected) << r.body;
  auto events = events_of(r.body);
  EXPECT_EQ(count_of(events, "message_start"), 1u) << r.body;
  EXPECT_EQ(count_of(events, "content_block_start"), 1u) << r.body;
  EXPECT_EQ(count_of(events, "content_block_stop"), 1u) << r.body;
  EXPECT_EQ(count_of(events, "message_stop"), 1u) << r.body;
  EXPECT_EQ(count_of(events, "error"), 0u) << r.body;
  EXPECT_EQ(facts.output_tokens, 12);
}

TEST(ResumeDialects, AnAnthropicStreamCutMidAnswerIsOneMessage) {
  proxy_fixture f(two_kinds());
  auto expected = text_of(observed(ask(f, "/v1/messages", messages_body("claude"), unfailed).body,
                                   dialect::anthropic_messages));
  ASSERT_FALSE(expected.empty());
  expect_one_message(ask(f, "/v1/messages", messages_body("claude"), cut_once), expected);
  expect_one_message(ask(f, "/v1/messages", messages_body("claude"), error_once), expected);
}

TEST(ResumeDialects, AResponsesStreamKeepsItsIdsAndSequence) {
  proxy_fixture f(two_kinds());
  auto expected = text_of(
      observed(ask(f, "/v1/responses", responses_body, unfailed).body, dialect::openai_responses));
  auto r = ask(f, "/v1/responses", responses_body, cut_once);
  ASSERT_TRUE(r.complete);
  auto facts = observed(r.body, dialect::openai_responses);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(text_of(facts), expected) << r.body;
  auto events = events_of(r.body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(count_of(events, "response.created"), 1u);
  EXPECT_EQ(count_of(events, "response.output_item.added"), 1u);
  EXPECT_EQ(count_of(events, "response.completed"), 1u);
  std::int64_t next = 0;
  std::set<std::string> item_ids;
  for (const auto& e : events) {
    EXPECT_EQ(e.data.at("sequence_number").as_int64(), next++) << e.type;
    if (auto* id = e.data.if_contains("item_id")) item_ids.insert(std::string(id->as_string()));
  }
  EXPECT_EQ(item_ids.size(), 1u) << r.body;
  const auto& created = events.front().data.at("response").as_object();
  const auto& completed = events.back().data.at("response").as_object();
  EXPECT_EQ(created.at("id"), completed.at("id")) << r.body;
  EXPECT_EQ(std::string(completed.at("output").as_array().at(0).as_object().at("id").as_string()),
            *item_ids.begin());
  EXPECT_EQ(f.engine_stats().requests.load(), 3u);  // the unfailed run, the cut one, the resume
}

TEST(ResumeDialects, AChatStreamKeepsOneChunkId) {
  proxy_fixture f(two_kinds());
  auto r = ask(f, "/v1/chat/completions", chat_body("local"), cut_once);
  ASSERT_TRUE(r.complete);
  EXPECT_TRUE(observed(r.body, dialect::openai_chat).ended_properly()) << r.body;
  std::set<std::string> ids;
  for (const auto& e : events_of(r.body)) ids.insert(std::string(e.data.at("id").as_string()));
  EXPECT_EQ(ids.size(), 1u) << r.body;
}

// A translated stream: its translator goes on where it was, so the
// client's stream is one whatever the attempts.
TEST(ResumeDialects, AChatClientOnAnAnthropicUpstreamIsResumed) {
  proxy_fixture f(two_kinds());
  auto expected = text_of(observed(
      ask(f, "/v1/chat/completions", chat_body("claude"), unfailed).body, dialect::openai_chat));
  auto r = ask(f, "/v1/chat/completions", chat_body("claude"), cut_once);
  ASSERT_TRUE(r.complete);
  auto facts = observed(r.body, dialect::openai_chat);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_FALSE(facts.error) << r.body;
  EXPECT_EQ(text_of(facts), expected) << r.body;
  EXPECT_EQ(facts.finish_by_choice.size(), 1u);
}

TEST(ResumeDialects, AnAnthropicClientOnAChatUpstreamIsResumed) {
  proxy_fixture f(two_kinds());
  auto expected = text_of(observed(ask(f, "/v1/messages", messages_body("local"), unfailed).body,
                                   dialect::anthropic_messages));
  expect_one_message(ask(f, "/v1/messages", messages_body("local"), error_once), expected);
}

}  // namespace
}  // namespace tokengate::test::resume_dialects

namespace tokengate::test::resume_dialects {
namespace {

// resume: prefill. The new attempt continues from what the client has
// (the demo engine continues a final assistant message, in chat with
// continue_final_message), so it generates only the rest.
fixture_options prefilling() {
  auto o = two_kinds();
  o.top_extra =
      "routes:\n"
      "  - {name: claude, models: [claude], targets: [{upstream: as_anthropic}],\n"
      "     retry_backoff: 1ms, resume: {mode: prefill}}\n"
      "  - {name: local, models: [local], targets: [{upstream: as_openai}],\n"
      "     retry_backoff: 1ms, resume: {mode: prefill}}\n";
  return o;
}

// (Counted when the exchange ends, just after the client has read it.)
std::uint64_t resumes_counted(proxy_fixture& f, const std::string& labels) {
  return metric_once_counted(f, "tokengate_stream_resumes_total{" + labels + "}");
}

TEST(ResumePrefill, AChatStreamIsContinuedFromWhatTheClientHas) {
  proxy_fixture f(prefilling());
  auto expected = text_of(observed(
      ask(f, "/v1/chat/completions", chat_body("local"), unfailed).body, dialect::openai_chat));
  auto r = ask(f, "/v1/chat/completions", chat_body("local"), cut_once);
  ASSERT_TRUE(r.complete);
  auto facts = observed(r.body, dialect::openai_chat);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(text_of(facts), expected) << r.body;
  EXPECT_EQ(facts.content_events, 12u);
  EXPECT_EQ(facts.output_tokens, 12) << "the completion the client received, once";
  // The resume asked for the rest only: an assistant message to continue.
  auto sent = f.engine_last_request();
  auto body = json::parse(std::string(sent.at("body").as_string())).as_object();
  EXPECT_EQ(body.at("continue_final_message"), json::value(true));
  const auto& last = body.at("messages").as_array().back().as_object();
  EXPECT_EQ(last.at("role"), json::value("assistant"));
  EXPECT_TRUE(expected.starts_with(std::string(last.at("content").as_string())));
  EXPECT_EQ(resumes_counted(f, R"(route="local",mode="prefill",reason="reset",result="completed")"),
            1u);
  std::set<std::string> ids;
  for (const auto& e : events_of(r.body)) ids.insert(std::string(e.data.at("id").as_string()));
  EXPECT_EQ(ids.size(), 1u) << r.body;
}

TEST(ResumePrefill, AnAnthropicStreamIsContinuedAsOneMessage) {
  proxy_fixture f(prefilling());
  auto expected = text_of(observed(ask(f, "/v1/messages", messages_body("claude"), unfailed).body,
                                   dialect::anthropic_messages));
  expect_one_message(ask(f, "/v1/messages", messages_body("claude"), error_once), expected);
  EXPECT_EQ(resumes_counted(
                f, R"(route="claude",mode="prefill",reason="error_event",result="completed")"),
            1u);
}

TEST(ResumePrefill, ATargetThatRefusesThePrefillIsRestarted) {
  proxy_fixture f(prefilling());
  auto expected = text_of(observed(
      ask(f, "/v1/chat/completions", chat_body("local"), unfailed).body, dialect::openai_chat));
  auto r = ask(f, "/v1/chat/completions", chat_body("local"),
               R"({"tokens":12,"ttft_ms":0,"interval_ms":2,"reset_after":5,"fail_times":1,)"
               R"("refuse_prefill":true})");
  ASSERT_TRUE(r.complete);
  auto facts = observed(r.body, dialect::openai_chat);
  EXPECT_TRUE(facts.ended_properly()) << r.body;
  EXPECT_EQ(text_of(facts), expected) << r.body;
  EXPECT_EQ(r.body.find("prefill"), std::string::npos) << "the refusal never reaches the client";
  EXPECT_EQ(
      resumes_counted(f, R"(route="local",mode="prefill",reason="reset",result="prefill_refused")"),
      1u);
  EXPECT_EQ(resumes_counted(f, R"(route="local",mode="restart",reason="reset",result="completed")"),
            1u);
  EXPECT_EQ(f.engine_stats().requests.load(), 4u);  // unfailed, cut, refused prefill, restart
}

TEST(ResumePrefill, TheTimeToResumeIsMeasured) {
  proxy_fixture f(prefilling());
  ask(f, "/v1/chat/completions", chat_body("local"), cut_once);
  auto page = http_get(f.admin_port(), "/metrics").body;
  auto at = page.find("tokengate_stream_time_to_resume_seconds_count{route=\"local\"");
  ASSERT_NE(at, std::string::npos) << page;
  EXPECT_EQ(page.substr(page.find("} ", at) + 2, 2), "1\n");
}

}  // namespace
}  // namespace tokengate::test::resume_dialects
