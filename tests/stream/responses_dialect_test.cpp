// The lean reader of the Responses API's deltas: what it reads from memory,
// what it leaves to the full parse, and that the observer finds the same
// kinds either way (tests/fuzz/sse_fuzz checks the same on arbitrary input).
#include "stream/responses_dialect.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "stream/observer.hpp"
#include "support/read_file.hpp"

namespace tokengate::stream {
namespace {

constexpr std::string_view text_delta = "response.output_text.delta";

// The kinds an observer gives one event with the lean readers and without;
// `lean_read` says whether the lean one answered for it.
struct both_ways {
  unsigned lean_kinds, full_kinds;
  bool lean_read;
};
both_ways observe(std::string_view type, const std::string& data) {
  stream_observer lean{dialect::openai_responses, false, true},
      full{dialect::openai_responses, false, false};
  lean.on_event(sse_event{type, data});
  full.on_event(sse_event{type, data});
  return {lean.last_kinds(), full.last_kinds(), lean.fast_path_events() == 1};
}

// A stream of deltas through one reader: every event must give what the
// full parse gives.
void read_both_ways(responses_delta_reader& reader, std::string_view type,
                    const std::vector<std::string>& events) {
  for (const auto& data : events) {
    unsigned kinds = 999;
    bool ok = reader.read(data, kinds);
    auto expected = observe(type, data);
    EXPECT_TRUE(ok) << data;
    EXPECT_EQ(kinds, expected.full_kinds) << data;
  }
}

// OpenAI's own order, as in tests/fixtures/sse/openai-responses.sse.
std::string openai(int sequence, std::string_view delta, std::string_view type = text_delta) {
  return R"({"type":")" + std::string(type) + R"(","sequence_number":)" + std::to_string(sequence) +
         R"(,"item_id":"msg_68a1c2f5a1b88193a8e2d7c4b3f6e0910e3f9c27d5a1b6e4","output_index":0,"content_index":0,"delta":")" +
         std::string(delta) + R"(","logprobs":[]})";
}

TEST(ResponsesDelta, TheFixturesDeltasAreReadFromMemoryAfterTheFirst) {
  stream_observer lean{dialect::openai_responses, false, true},
      full{dialect::openai_responses, false, false};
  sse_parser a, b;
  auto bytes =
      test::read_file(std::filesystem::path(TOKENGATE_FIXTURES) / "sse" / "openai-responses.sse");
  a.feed(bytes, lean);
  b.feed(bytes, full);
  EXPECT_EQ(lean.facts().text_events, 17u);
  EXPECT_EQ(lean.facts().text_events, full.facts().text_events);
  EXPECT_EQ(lean.facts().first_text_event, full.facts().first_text_event);
  EXPECT_EQ(lean.fast_path_events(), 17u) << "every delta, and no other event";
  EXPECT_EQ(full.fast_path_events(), 0u);
}

TEST(ResponsesDelta, ReadsEveryServersShapeAsTheFullParseDoes) {
  const std::string vllm_reasoning = "response.reasoning_text.delta";
  struct stream_of {
    std::string name, type;
    std::vector<std::string> events;
  };
  auto vllm = [](int content_index, std::string_view delta,
                 int sequence) {  // alphabetical; its index moves
    return R"({"content_index":)" + std::to_string(content_index) + R"(,"delta":")" +
           std::string(delta) +
           R"(","item_id":"04429e29-baa2-4255-96a9-343a414c4cbe","output_index":0,"sequence_number":)" +
           std::to_string(sequence) + R"(,"type":"response.reasoning_text.delta"})";
  };
  auto obfuscated = [](int sequence, std::string_view delta,
                       std::string_view padding) {  // OpenAI since 2025
    return R"({"type":"response.output_text.delta","sequence_number":)" + std::to_string(sequence) +
           R"(,"item_id":"msg_1","output_index":0,"content_index":0,"delta":")" +
           std::string(delta) + R"(","logprobs":[],"obfuscation":")" + std::string(padding) +
           R"("})";
  };
  const stream_of streams[] = {
      {"openai",
       std::string(text_delta),
       {openai(4, "Blue"), openai(5, " light"), openai(6, ""), openai(7, R"( caf\u00e9 \"q\")"),
        openai(8, " 日本"), openai(123456789, "x")}},
      {"openai, obfuscated",
       std::string(text_delta),
       {obfuscated(4, "Hi", "Zr2Xs8JpQ"), obfuscated(5, " there", "a"), obfuscated(6, "!", ""),
        obfuscated(7, "", "kQ3")}},
      {"vllm reasoning",
       vllm_reasoning,
       {vllm(92, " is", 95), vllm(93, " a", 96), vllm(94, "", 97), vllm(95, ",", 98)}},
      {"summary",
       "response.reasoning_summary_text.delta",
       {openai(3, "**Plan**", "response.reasoning_summary_text.delta"),
        openai(4, " first", "response.reasoning_summary_text.delta")}},
      {"arguments",
       "response.function_call_arguments.delta",
       {openai(9, R"({\"city\":)", "response.function_call_arguments.delta"),
        openai(10, R"( \"Paris\"})", "response.function_call_arguments.delta"),
        openai(11, "", "response.function_call_arguments.delta")}},
  };
  for (const auto& s : streams) {
    SCOPED_TRACE(s.name);
    responses_delta_reader reader;
    read_both_ways(reader, s.type, s.events);
    EXPECT_EQ(reader.remembered_reads(), s.events.size() - 1)
        << "the first learned, the rest from memory";
    for (const auto& data : s.events) {
      auto r = observe(s.type, data);
      EXPECT_TRUE(r.lean_read) << data;
      EXPECT_EQ(r.lean_kinds, r.full_kinds) << data;
    }
  }
}

// The second delta shows which values vary; the rest are compared as bytes
// from then on, so a value that was the same twice and changes later (a new
// item's id) is learned afresh, and the text, even when it repeats, stays
// a hole: the kinds are read from it.
TEST(ResponsesDelta, TheSecondDeltaShowsWhichValuesVary) {
  auto delta = [](int sequence, std::string_view item, std::string_view text) {
    return R"({"type":"response.output_text.delta","sequence_number":)" + std::to_string(sequence) +
           R"(,"item_id":")" + std::string(item) +
           R"(","output_index":0,"content_index":0,"delta":")" + std::string(text) +
           R"(","logprobs":[]})";
  };
  struct step {
    std::string data;
    std::size_t remembered_reads;  // after it
  };
  const step steps[] = {
      {delta(4, "msg_1", " the"), 0},  // learned
      {delta(5, "msg_1", " the"), 1},  // the same text twice: it stays a hole
      {delta(6, "msg_1", " cat"), 2},
      {delta(7, "msg_1", ""), 3},    // empty: no kind, read from memory
      {delta(8, "msg_22", "x"), 3},  // a new item: learned afresh
      {delta(9, "msg_22", "y"), 4},
      {delta(10, "msg_333", "z"), 4},  // and again
      {delta(11, "msg_333", ""), 5},
  };
  responses_delta_reader reader;
  for (const auto& st : steps) {
    unsigned kinds = 999;
    EXPECT_TRUE(reader.read(st.data, kinds)) << st.data;
    EXPECT_EQ(kinds, observe(text_delta, st.data).full_kinds) << st.data;
    EXPECT_EQ(reader.remembered_reads(), st.remembered_reads) << st.data;
  }
}

TEST(ResponsesDelta, LeavesEverythingUnusualToTheFullParse) {
  const std::string head = R"({"type":"response.output_text.delta","sequence_number":4,)";
  const std::string unusual[] = {
      R"({"type": "response.output_text.delta","sequence_number":4,"delta":"x"})",  // blanks
      head + R"("delta":"x","logprobs":[{"token":"x","logprob":-0.1}]})",           // nesting
      head + R"("delta":"x","error":null})",  // an error member
      head + R"("delta":"x","delta":""})",    // a duplicate key
      head + R"("delta":"","delta":"x"})",
      head + R"("del\u0074a":"x"})",               // an escaped key
      head + R"("delta":"x","output_index":-1})",  // numbers not vouched for
      head + R"("delta":"x","output_index":1.5})",
      head + R"("delta":"x","output_index":1e3})",
      head + R"("delta":"x","output_index":01})",
      head + R"("delta":"x","output_index":1234567890123456789})",
      head + R"("delta":null})",  // a delta that is no string
      head + R"("delta":7})",
      head + R"("text":"x"})",                                                    // no delta
      R"({"type":"response.output_text.done","sequence_number":4,"delta":"x"})",  // not a delta
                                                                                  // event
      R"({"type":"response.output_text.d\u0065lta","sequence_number":4,"delta":"x"})",
      R"({"sequence_number":4,"delta":"x"})",  // no type
      head + R"("delta":"x"} )",               // trailing bytes
      head + R"("delta":"x"}x)",
      head + R"("delta":"x",})",
      head + R"("delta":"x")",               // cut
      head + R"("delta":"x\ud83d\ude00"})",  // surrogates
      head + "\"delta\":\"\xC0\xAF\"}",      // overlong UTF-8
      head +
          R"("a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"delta":"x"})",
  };
  for (const auto& data : unusual) {
    responses_delta_reader reader;
    unsigned kinds = 999;
    EXPECT_FALSE(reader.read(data, kinds)) << data;
    auto r = observe(text_delta, data);
    EXPECT_FALSE(r.lean_read) << data;
    EXPECT_EQ(r.lean_kinds, r.full_kinds) << data;
  }
  // An error event is never read the lean way, whatever its data.
  stream_observer lean{dialect::openai_responses, false, true};
  lean.on_event(sse_event{"error", openai(1, "x")});
  EXPECT_EQ(lean.fast_path_events(), 0u);
}

// After a delta has been learned: only valid values of the same kind in
// the holes are read from memory; anything else is read afresh (and, when
// that refuses it too, by the full parse), with the same kinds either way.
TEST(ResponsesDelta, OnlyValidValuesInTheHolesAreReadFromMemory) {
  struct variant {
    std::string data;
    bool from_memory;
  };
  const variant variants[] = {
      {openai(5, ""), true},
      {openai(5, R"(\"\\\/\b\f\n\r\t\u00e9)"), true},
      {openai(5, "\xE2\x98\x83"), true},
      {openai(99, "x"), true},
      {openai(5, R"(a","x":"b)"), false},  // a quote: another shape
      {openai(5, R"(ab\)"), false},        // the closing quote escaped
      {openai(5, R"(\u12)"), false},       // a cut escape
      {openai(5, R"(\ud83d\ude00)"), false},
      {openai(5, "a\x01"), false},     // a raw control character
      {openai(5, "\xE6\x97"), false},  // a cut UTF-8 sequence
      {R"({"type":"response.output_text.delta","sequence_number":05,"item_id":"msg_68a1c2f5a1b88193a8e2d7c4b3f6e0910e3f9c27d5a1b6e4","output_index":0,"content_index":0,"delta":"x","logprobs":[]})",
       false},
      {R"({"type":"response.output_text.delta","sequence_number":5.0,"item_id":"msg_68a1c2f5a1b88193a8e2d7c4b3f6e0910e3f9c27d5a1b6e4","output_index":0,"content_index":0,"delta":"x","logprobs":[]})",
       false},
      {R"({"type":"response.output_text.delta","sequence_number":"5","item_id":"msg_68a1c2f5a1b88193a8e2d7c4b3f6e0910e3f9c27d5a1b6e4","output_index":0,"content_index":0,"delta":"x","logprobs":[]})",
       false},
      {openai(5, "x", "response.reasoning_text.delta"), false},  // another type: learned afresh
      {openai(5, "x") + " ", false},
  };
  for (const auto& v : variants) {
    responses_delta_reader reader;
    unsigned kinds = 999;
    ASSERT_TRUE(reader.read(openai(4, "a"), kinds));
    EXPECT_EQ(kinds, unsigned{kind_text});
    kinds = 999;
    bool ok = reader.read(v.data, kinds);
    auto r = observe(text_delta, v.data);
    EXPECT_EQ(ok, r.lean_read) << v.data;
    if (ok) {
      EXPECT_EQ(kinds, r.full_kinds) << v.data;
    }
    EXPECT_EQ(r.lean_kinds, r.full_kinds) << v.data;
    EXPECT_EQ(reader.remembered_reads(), v.from_memory ? 1u : 0u) << v.data;
  }
}

}  // namespace
}  // namespace tokengate::stream
