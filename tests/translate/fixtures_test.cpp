// Every chat and Anthropic fixture stream translated to the other dialect,
// then read by that dialect's observer and compared, field by field, with
// what the fixture's .expect.json says of the original: the text, the
// reasoning, the tool calls, the usage, the finish (mapped), the error.
#include "support/fixtures.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>

#include "stream/observer.hpp"
#include "stream/sse_parser.hpp"
#include "support/read_file.hpp"
#include "translate/anthropic_from_chat.hpp"
#include "translate/chat_from_anthropic.hpp"
#include "translate/translation.hpp"

namespace tokengate {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// The translator as the relay drives it: each whole event, then the end.
class translating_feed final : public stream::sse_sink {
 public:
  explicit translating_feed(stream::answer_translator& t) : t_(t) {}
  void on_event(const stream::sse_event& e) override { t_.on_event(e, out); }
  std::string out;

 private:
  stream::answer_translator& t_;
};

// The fixture's body fed `piece` bytes at a time (0: whole), translated.
std::string translate_body(const std::string& body, dialect client, std::size_t piece) {
  auto upstream =
      client == dialect::openai_chat ? dialect::anthropic_messages : dialect::openai_chat;
  // (a fixed time in the chunks: translations made seconds apart are compared)
  std::unique_ptr<stream::answer_translator> translator;
  if (upstream == dialect::anthropic_messages)
    translator = std::make_unique<translate::chat_from_anthropic>(true, 1796000000);
  else
    translator = std::make_unique<translate::anthropic_from_chat>("client-model");
  translating_feed feed(*translator);
  stream::sse_parser parser;
  if (piece == 0) piece = body.size();
  for (std::size_t at = 0; at < body.size(); at += piece)
    parser.feed(std::string_view(body).substr(at, piece), feed);
  translator->on_end(feed.out);
  return feed.out;
}

stream::stream_facts observe_translated(const std::string& events, dialect d) {
  stream::stream_observer observer(d, true);
  stream::sse_parser parser;
  parser.feed(events, observer);
  return observer.facts();
}

std::string expected_finish(const std::string& original, dialect client) {
  if (original.empty()) return "";
  return std::string(client == dialect::openai_chat ? translate::finish_reason_for(original)
                                                    : translate::stop_reason_for(original));
}

std::vector<fs::path> translatable_fixtures() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(TOKENGATE_FIXTURES) / "sse")) {
    if (e.path().extension() != ".sse") continue;
    auto d = test::fixture_dialect(e.path());
    if (d != dialect::openai_chat && d != dialect::anthropic_messages) continue;
    out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TranslatedFixtures, SayWhatTheOriginalSaid) {
  int compared = 0;
  for (const auto& path : translatable_fixtures()) {
    SCOPED_TRACE(path.filename().string());
    auto expect_path = path;
    auto expect =
        json::parse(test::read_file(expect_path.replace_extension(".expect.json"))).as_object();
    if (!expect.at("output_text_by_choice").is_null()) continue;  // n > 1: one message only
    auto origin = test::fixture_dialect(path);
    auto client =
        origin == dialect::openai_chat ? dialect::anthropic_messages : dialect::openai_chat;
    auto body = test::read_file(path);
    auto translated = translate_body(body, client, 0);
    auto facts = observe_translated(translated, client);

    if (!expect.at("error").is_null()) {
      EXPECT_TRUE(facts.error) << translated;
      ++compared;
      continue;
    }
    const auto& text = expect.at("output_text");
    EXPECT_EQ(facts.text_by_choice[0], text.is_string() ? std::string(text.as_string()) : "");
    EXPECT_EQ(facts.reasoning_text, std::string(expect.at("reasoning_text").as_string()));
    const auto& calls = expect.at("tool_calls").as_array();
    ASSERT_EQ(facts.tool_calls.size(), calls.size()) << translated;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(facts.tool_calls[i].name, calls[i].at("name").as_string());
      EXPECT_EQ(facts.tool_calls[i].arguments, calls[i].at("arguments").as_string());
    }
    if (const auto& usage = expect.at("usage");
        usage.is_object() && !usage.at("output_tokens").is_null()) {
      EXPECT_EQ(facts.output_tokens, usage.at("output_tokens").to_number<std::int64_t>());
      if (!usage.at("input_tokens").is_null()) {
        EXPECT_EQ(facts.input_tokens, usage.at("input_tokens").to_number<std::int64_t>());
      }
    }
    const auto& finish = expect.at("finish_reason");
    EXPECT_EQ(facts.finish_reason,
              expected_finish(finish.is_string() ? std::string(finish.as_string()) : "", client));
    if (expect.at("ended_properly").as_bool()) {
      EXPECT_TRUE(facts.ended_properly()) << translated;
    }
    // The same translation whatever the pieces the body arrived in.
    EXPECT_EQ(translate_body(body, client, 1), translated);
    EXPECT_EQ(translate_body(body, client, 7), translated);
    ++compared;
  }
  EXPECT_GE(compared, 12);
}

// Each upstream event is translated as it arrives: the client's events for
// a content event are written before the next upstream event is seen.
TEST(TranslatedFixtures, NoEventIsHeldBack) {
  for (auto client : {dialect::openai_chat, dialect::anthropic_messages}) {
    auto upstream =
        client == dialect::openai_chat ? dialect::anthropic_messages : dialect::openai_chat;
    auto name = client == dialect::openai_chat ? "anthropic-messages.sse" : "openai-chat-basic.sse";
    auto translator = translate::answer_translator_for(client, upstream, true, "m");
    stream::stream_observer upstream_reading(upstream, true);
    auto body = test::read_file(fs::path(TOKENGATE_FIXTURES) / "sse" / name);
    class each_event final : public stream::sse_sink {
     public:
      each_event(stream::answer_translator& t, stream::stream_observer& o) : t_(t), o_(o) {}
      void on_event(const stream::sse_event& e) override {
        o_.on_event(e);
        std::string out;
        t_.on_event(e, out);
        if (o_.last_kinds() & stream::content_kinds) {
          ++content;
          if (!out.empty()) ++translated_at_once;
        }
      }
      int content = 0, translated_at_once = 0;

     private:
      stream::answer_translator& t_;
      stream::stream_observer& o_;
    } feed(*translator, upstream_reading);
    stream::sse_parser parser;
    parser.feed(body, feed);
    EXPECT_GT(feed.content, 3) << name;
    EXPECT_EQ(feed.translated_at_once, feed.content) << name;
  }
}

}  // namespace
}  // namespace tokengate
