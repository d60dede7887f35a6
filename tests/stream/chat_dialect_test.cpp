// The lean chat-chunk reader: what it reads, what it leaves to the full
// parse, and that the observer finds the same facts either way on every
// fixture (tests/fuzz/sse_fuzz checks the same on arbitrary input).
#include "stream/chat_dialect.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "stream/anthropic_dialect.hpp"
#include "stream/observer.hpp"
#include "support/fixtures.hpp"
#include "support/read_file.hpp"

namespace tokengate::stream {
namespace {

namespace fs = std::filesystem;

using test::read_file;

// Feeds each event to an observer with the lean reader and one without,
// comparing the kinds they give it as they go.
struct side_by_side final : sse_sink {
  explicit side_by_side(dialect d) : lean(d, false, true), full(d, false, false) {}
  stream_observer lean;
  stream_observer full;
  std::size_t events = 0;
  void on_event(const sse_event& e) override {
    lean.on_event(e);
    full.on_event(e);
    ++events;
    EXPECT_EQ(lean.last_kinds(), full.last_kinds()) << "event " << events << ": " << e.data;
  }
};

void expect_same_facts(const stream_facts& a, const stream_facts& b) {
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.first_content_event, b.first_content_event);
  EXPECT_EQ(a.first_text_event, b.first_text_event);
  EXPECT_EQ(a.content_events, b.content_events);
  EXPECT_EQ(a.text_events, b.text_events);
  EXPECT_EQ(a.reasoning_events, b.reasoning_events);
  EXPECT_EQ(a.tool_call_events, b.tool_call_events);
  EXPECT_EQ(a.input_tokens, b.input_tokens);
  EXPECT_EQ(a.output_tokens, b.output_tokens);
  EXPECT_EQ(a.usage_events, b.usage_events);
  EXPECT_EQ(a.finish_reason, b.finish_reason);
  EXPECT_EQ(a.finish_by_choice, b.finish_by_choice);
  EXPECT_EQ(a.terminator, b.terminator);
  EXPECT_EQ(a.error, b.error);
}

TEST(ChatChunk, EveryFixtureGivesTheSameFactsWithOrWithoutTheLeanReader) {
  std::size_t lean_events = 0;
  for (const auto& e : fs::directory_iterator(fs::path(TOKENGATE_FIXTURES) / "sse")) {
    if (e.path().extension() != ".sse") continue;
    SCOPED_TRACE(e.path().filename().string());
    side_by_side both(test::fixture_dialect(e.path()));
    sse_parser parser;
    parser.feed(read_file(e.path()), both);
    expect_same_facts(both.lean.facts(), both.full.facts());
    EXPECT_EQ(both.full.fast_path_events(), 0u);
    lean_events += both.lean.fast_path_events();
    if (e.path().filename() == "openai-chat-basic.sse") {
      // Every token of the plain stream is read the lean way.
      EXPECT_GT(both.lean.facts().content_events, 0u);
      EXPECT_EQ(both.lean.fast_path_events() + 1, both.lean.facts().events);  // all but [DONE]
    }
  }
  EXPECT_GT(lean_events, 50u);
}

TEST(ChatChunk, ReadsTheCommonShapes) {
  chat_chunk c;
  ASSERT_TRUE(read_chat_chunk(
      R"({"id":"x","object":"chat.completion.chunk","created":1796103972,"model":"m","system_fingerprint":null,)"
      R"("choices":[{"index":0,"delta":{"role":"assistant","content":"h\u00e9 \"\u2603\" 日本"},"logprobs":null,)"
      R"("finish_reason":null}],"usage":null})",
      c));
  ASSERT_EQ(c.choice_count, 1u);
  EXPECT_TRUE(c.choices[0].text);
  EXPECT_FALSE(c.choices[0].reasoning);
  EXPECT_EQ(c.choices[0].finish_reason, "");
  EXPECT_FALSE(c.usage);

  ASSERT_TRUE(
      read_chat_chunk(R"( {"choices":[{"index":1,"delta":{"reasoning_content":"hm","content":""},)"
                      R"("finish_reason":"length"},{"index":0,"text":"t","finish_reason":"stop"}],)"
                      R"("usage":{"prompt_tokens":12,"completion_tokens":340,"total_tokens":352,)"
                      R"("prompt_tokens_details":{"cached_tokens":0}}} )",
                      c));
  ASSERT_EQ(c.choice_count, 2u);
  EXPECT_EQ(c.choices[0].index, 1);
  EXPECT_FALSE(c.choices[0].text);  // empty content is no token
  EXPECT_TRUE(c.choices[0].reasoning);
  EXPECT_EQ(c.choices[0].finish_reason, "length");
  EXPECT_TRUE(c.choices[1].text);
  EXPECT_EQ(c.choices[1].finish_reason, "stop");
  EXPECT_TRUE(c.usage);
  EXPECT_EQ(c.prompt_tokens, 12);
  EXPECT_EQ(c.completion_tokens, 340);

  // A count that is not a number is no count, as in the full parse.
  ASSERT_TRUE(read_chat_chunk(R"({"choices":[],"usage":{"prompt_tokens":"12"}})", c));
  EXPECT_TRUE(c.usage);
  EXPECT_FALSE(c.prompt_tokens.has_value());
  EXPECT_FALSE(c.completion_tokens.has_value());
}

TEST(ChatChunk, LeavesEverythingUnusualToTheFullParse) {
  const char* declined[] = {
      R"({"type":"message_start","choices":[]})",  // Anthropic / Responses shapes
      R"({"error":null,"choices":[]})",            // error members, even falsy
      R"({"choices":[{"delta":{"tool_calls":[],"tool_calls":[]}}]})",  // twice
      R"({"choices":[{"delta":{"tool_calls":[{"function":{},"function":{}}]}}]})",
      R"({"choices":[{"delta":{"tool_calls":[{"function":{"name":"a","name":"b"}}]}}]})",
      R"({"choices":[{"delta":{"tool_calls":[{"function":{"n\u0061me":"a"}}]}}]})",  // an escaped
                                                                                     // key
      R"({"ch\u006fices":[]})",          // an escaped key
      R"({"choices":[],"choices":[]})",  // duplicate keys
      R"({"choices":[{"index":0,"index":1}]})",
      R"({"choices":[{"index":1e0}]})",  // exponents
      R"({"choices":[],"created":1e400})",
      R"({"choices":[{"index":-1}]})",                          // signs
      R"({"choices":[],"n":12345678901234567890})",             // past 18 digits
      R"({"choices":[{"index":77777777777777777777}]})",        // (found by sse_fuzz: overflowed)
      R"({"choices":[{"index":9333333333333333333}]})",         // 19 digits (sse_fuzz again)
      R"({"choices":[{"delta":{"content":"\ud83d\ude00"}}]})",  // surrogates
      R"({"choices":[{"finish_reason":"st\u006fp"}]})",         // an escaped finish reason
      R"({"choices":{}})",                                      // choices not an array
      R"({"id":"x"})",                                          // no choices
      R"([{"choices":[]}])",                                    // not an object
      R"({"choices":[]} x)",                                    // trailing bytes
      R"({"choices":[],})",                                     // trailing comma
      R"({"choices":[01]})",                                    // leading zero
      R"({"choices":[tru]})",                                   // a broken literal
      R"({"choices":[{"delta":{"content":"a)"
      "\x01"
      R"("}}]})",                                                        // a raw control character
      "{\"choices\":[{\"delta\":{\"content\":\"\xC0\xAF\"}}]}",          // overlong UTF-8
      "{\"choices\":[{\"delta\":{\"content\":\"\xED\xA0\x80\"}}]}",      // a surrogate in UTF-8
      "{\"choices\":[{\"delta\":{\"content\":\"\xF4\x90\x80\x80\"}}]}",  // past U+10FFFF
      "{\"choices\":[{\"delta\":{\"content\":\"\xE6\x97\"}}]}",          // a cut sequence
      R"({"choices":[],"deep":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]})",  // deep nesting
      R"({"choices":[{"index":0,"delta":{"content":"a"})",                  // cut off
      "",
  };
  for (const char* data : declined) {
    chat_chunk c;
    EXPECT_FALSE(read_chat_chunk(data, c)) << data;
  }
  // Nine choices: more than the reader keeps.
  std::string many = R"({"choices":[)";
  for (int i = 0; i < 9; ++i)
    many += std::string(i ? "," : "") + R"({"index":)" + std::to_string(i) + "}";
  chat_chunk c;
  EXPECT_FALSE(read_chat_chunk(many + "]}", c));
}

void expect_same_chunk(const chat_chunk& a, const chat_chunk& b, std::string_view data) {
  ASSERT_EQ(a.choice_count, b.choice_count) << data;
  for (std::size_t i = 0; i < a.choice_count; ++i) {
    EXPECT_EQ(a.choices[i].index, b.choices[i].index) << data;
    EXPECT_EQ(a.choices[i].text, b.choices[i].text) << data;
    EXPECT_EQ(a.choices[i].reasoning, b.choices[i].reasoning) << data;
    EXPECT_EQ(a.choices[i].tool_call, b.choices[i].tool_call) << data;
    EXPECT_EQ(a.choices[i].finish_reason, b.choices[i].finish_reason) << data;
  }
  EXPECT_EQ(a.usage, b.usage) << data;
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens) << data;
  EXPECT_EQ(a.completion_tokens, b.completion_tokens) << data;
}

std::string demo_chunk(std::string_view delta, std::string_view finish = "null") {
  return R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1796139637,"model":"demo",)"
         R"("choices":[{"index":0,"delta":{)" +
         std::string(delta) + R"(},"finish_reason":)" + std::string(finish) +
         R"(}],"usage":{"prompt_tokens":7,"completion_tokens":null}})";
}

// Reads a stream's chunks with `reader` and each afresh: both must say the
// same.
void read_both_ways(chat_chunk_reader& reader, const std::vector<std::string>& stream) {
  for (const auto& data : stream) {
    chat_chunk remembered, fresh;
    ASSERT_TRUE(reader.read(data, remembered)) << data;
    ASSERT_TRUE(read_chat_chunk(data, fresh)) << data;
    expect_same_chunk(remembered, fresh, data);
  }
}

// Reads `remembered`, then `data`, with one reader: `data` must read as a
// fresh read does, from memory or not as `from_memory` says.
void expect_read_after(std::string_view remembered, std::string_view data, bool from_memory) {
  chat_chunk_reader reader;
  chat_chunk first;
  ASSERT_TRUE(reader.read(remembered, first)) << remembered;
  chat_chunk from_reader, fresh;
  bool ok = reader.read(data, from_reader);
  EXPECT_EQ(ok, read_chat_chunk(data, fresh)) << data;
  if (ok) expect_same_chunk(from_reader, fresh, data);
  EXPECT_EQ(reader.remembered_reads(), from_memory ? 1u : 0u) << data;
}

// The chunks of a fixture's stream, as the reader gets them.
std::vector<std::string> fixture_chunks(std::string_view name) {
  std::vector<std::string> stream;
  std::istringstream lines(read_file(fs::path(TOKENGATE_FIXTURES) / "sse" / name));
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("data: {")) stream.push_back(line.substr(6));
  return stream;
}

TEST(ChatChunk, AStreamsRepeatedChunksAreReadFromMemoryWithTheSameResult) {
  std::vector<std::string> stream{demo_chunk(R"("role":"assistant","content":"")")};
  for (std::string_view word :
       {"The", " quick", "", R"( caf\u00e9)", R"( \"q\")", " 日本", R"(\\)"})
    stream.push_back(demo_chunk(R"("content":")" + std::string(word) + "\""));
  stream.push_back(demo_chunk(R"("content":"")", R"("stop")"));
  stream.push_back(demo_chunk(R"("content":"again")"));

  chat_chunk_reader reader;
  read_both_ways(reader, stream);
  // The role chunk and the first token chunk are read in full, then every
  // token from memory; the finish chunk does not match (and is not
  // remembered: its reason is a view into its own bytes), the next does.
  EXPECT_EQ(reader.remembered_reads(), stream.size() - 3);
}

// A chunk that changes shape (the finish, the usage) but starts with the
// remembered chunk's members before `choices` is read from after them; it
// must read exactly as a fresh read does, whatever follows those bytes.
TEST(ChatChunk, AChunkStartingWithTheRememberedMembersReadsAsAFreshReadDoes) {
  const std::string remembered = demo_chunk(R"("content":"a")");
  const std::string start =
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1796139637,"model":"demo",)";
  struct variant {
    std::string data;
    bool resumed;  // accepted, read from after the remembered members (a refused read counts none)
  };
  const variant variants[] = {
      {demo_chunk(R"("content":"")", R"("stop")"), true},
      {start +
           R"("choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}})",
       true},
      {start + R"("usage":{"prompt_tokens":3},"choices":[{"index":1,"text":"x"}]})", true},
      {start + "\n \"choices\":[{\"delta\":{\"reasoning\":\"r\"}}]}", true},
      {start + R"("model":"again","choices":[]})",
       true},                                            // an untracked key twice: as a fresh read
      {start + R"("choices":[],"choices":[]})", false},  // a tracked one twice: the full parser's
      {start + R"("type":"x","choices":[]})", false},    // another dialect's member
      {start + R"("choices":[{"index":0,"delta":{"content":"a"}}])", false},  // unterminated
      {start + R"("choices":[]}  )", true},
      {start + R"("choices":[]}x)", false},
      {start + R"("choices":[]})", true},
      {start + R"(})", false},  // a comma before '}'
      {start + R"(,"choices":[]})", false},
      {R"({"id":"chatcmpl-2","object":"chat.completion.chunk","created":1796139637,"model":"demo","choices":[]})",
       false},
  };
  for (const auto& v : variants) {
    chat_chunk_reader reader;
    chat_chunk first;
    ASSERT_TRUE(reader.read(remembered, first));
    chat_chunk from_reader, fresh;
    bool ok = reader.read(v.data, from_reader);
    EXPECT_EQ(ok, read_chat_chunk(v.data, fresh)) << v.data;
    if (ok) expect_same_chunk(from_reader, fresh, v.data);
    EXPECT_EQ(reader.resumed_reads(), v.resumed ? 1u : 0u) << v.data;
    EXPECT_EQ(reader.remembered_reads(), 0u) << v.data;
  }
}

TEST(ChatChunk, OnlyAValidStringBetweenTheRememberedBytesIsReadFromMemory) {
  const std::string remembered = demo_chunk(R"("content":"a")");
  struct variant {
    std::string content;  // what stands between the remembered bytes
    bool from_memory;
  };
  const variant variants[] = {
      {"", true},
      {"b", true},
      {R"(\"\\\/\b\f\n\r\t\u00e9)", true},
      {"\xE2\x98\x83", true},
      {R"(a","x":"b)", false},  // a quote: a different shape, read in full (and valid)
      {R"(a"},"y":{"z":")", false},
      {R"(ab\)", false},           // the closing quote would be escaped: unterminated
      {R"(\u12)", false},          // a cut \u escape
      {R"(\ud83d\ude00)", false},  // surrogates: the full reader's to decline
      {R"(\x)", false},            // no such escape
      {"a\x01", false},            // a raw control character
      {"\xE6\x97", false},         // a cut UTF-8 sequence
      {"\xC0\xAF", false},         // overlong UTF-8
  };
  for (const auto& v : variants)
    expect_read_after(remembered, demo_chunk(R"("content":")" + v.content + "\""), v.from_memory);
}

// OpenAI's chunks end with an "obfuscation" string of random length: a
// second hole, so that they are read from memory too; only a valid string
// there is, and anything else is read in full with the same result.
TEST(ChatChunk, OpenAIsPaddedChunksAreReadFromMemory) {
  auto padded = [](std::string_view content, std::string_view padding, std::string_view last = "") {
    return R"({"id":"chatcmpl-C5q","object":"chat.completion.chunk","created":1755172101,"model":"gpt-4o-mini",)"
           R"("service_tier":"default","choices":[{"index":0,"delta":{"content":")" +
           std::string(content) + R"("},"logprobs":null,"finish_reason":null}],"obfuscation":")" +
           std::string(padding) + "\"" + std::string(last) + "}";
  };
  struct variant {
    std::string data;
    bool from_memory;
  };
  const variant variants[] = {
      {padded("Blue", "kP2xQ"), true},
      {padded("", "v8"), true},
      {padded(" light", ""), true},
      {padded(R"( \"q\")", R"(caf\u00e9)"), true},
      {padded(" x", "\xE6\x97\xA5"), true},
      {padded(" x", R"(a\"b)"), false},             // a quote inside: read in full, valid
      {padded(" x", R"(a\)"), false},               // the closing quote escaped: not JSON
      {padded(" x", "a\x01"), false},               // a raw control character
      {padded(" x", "\xC0\xAF"), false},            // overlong UTF-8
      {padded(" x", "ab", R"(,"more":1)"), false},  // not the last member
      {padded(R"(a","obfuscation":"b)", "c"), false},
      {padded(" x", R"(z"},"logprobs":null,"finish_reason":null}],"obfuscation":"y)"), false},
  };
  for (const auto& v : variants) expect_read_after(padded("a", "Zr1mT0"), v.data, v.from_memory);
  // The fixture from OpenAI's own chunks: all token chunks but the first
  // from memory.
  chat_chunk_reader reader;
  auto stream = fixture_chunks("openai-chat-basic.sse");
  read_both_ways(reader, stream);
  EXPECT_EQ(reader.remembered_reads(), 16u) << "of " << stream.size() << " chunks";
}

// Any last member holding a string or a plain integer that varies from
// chunk to chunk is a hole as OpenAI's padding is: a counter, a clock (the
// demo engine's stamp, which the benchmark's slow streams all carry). A
// key of other characters, or a value of another kind, is read in full
// (objects of counts: the next test).
TEST(ChatChunk, AVaryingLastStringOrIntegerIsReadFromMemory) {
  auto stamped = [](std::string_view member, std::string_view value) {
    return R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1796139637,"model":"demo",)"
           R"("choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}],)" +
           std::string(member) + ":" + std::string(value) + "}";
  };
  struct variant {
    std::string member, remembered, value;
    bool from_memory;
  };
  const variant variants[] = {
      {R"("demo_sent_us")", "57160475557", "57160475582", true},
      {R"("demo_sent_us")", "57160475557", "0", true},
      {R"("demo_sent_us")", "57160475557", "999999999999999999", true},  // 18 digits
      {R"("demo_sent_us")", "57160475557", "1000000000000000000",
       false},  // 19: the full read's to judge
      {R"("demo_sent_us")", "57160475557", "-5", false},
      {R"("demo_sent_us")", "57160475557", "1.5", false},
      {R"("demo_sent_us")", "57160475557", "1e3", false},
      {R"("demo_sent_us")", "57160475557", "01", false},  // not JSON
      {R"("demo_sent_us")", "57160475557", "", false},    // not JSON
      {R"("demo_sent_us")", "57160475557", R"("57")", false},
      {R"("demo_sent_us")", "57160475557", "null", false},
      {R"("seq")", R"("a")", R"("bcd")", true},
      {R"("seq")", R"("a")", "7", false},
      {R"("seq")", "-1", "-2", false},  // a sign: no hole remembered
      {R"("x-seq")", "1", "2", false},  // a key beyond [A-Za-z0-9_]: no hole remembered
      {R"("seq")", R"({"n":[1]})", R"({"n":[2]})", false},  // an array in an object: no hole
  };
  for (const auto& v : variants)
    expect_read_after(stamped(v.member, v.remembered), stamped(v.member, v.value), v.from_memory);
  // A whole stamped stream, as the demo engine writes it for the benchmark.
  std::vector<std::string> stream;
  for (std::string_view word : {"The", " quick", "", R"( \"q\")"})
    stream.push_back(
        R"({"id":"chatcmpl-demo-1","object":"chat.completion.chunk","created":1796359415,"model":"m",)"
        R"("choices":[{"index":0,"delta":{"content":")" +
        std::string(word) + R"("},"finish_reason":null}],"demo_sent_us":)" +
        std::to_string(57160475557 + 25 * stream.size()) + "}");
  chat_chunk_reader reader;
  read_both_ways(reader, stream);
  EXPECT_EQ(reader.remembered_reads(), stream.size() - 1);
}

// vLLM and SGLang, asked for continuous_usage_stats (billing gateways ask,
// so that a stream cut short is still counted), send the usage so far in
// every chunk: each count of a flat object of plain integers is a hole,
// and usage's prompt and completion counts are read from the chunk's own
// bytes. Anything else in that object is read in full.
TEST(ChatChunk, UsageSentWithEveryChunkIsReadFromMemory) {
  auto counted = [](std::string_view member, std::string_view object) {
    return R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1796139637,"model":"demo",)"
           R"("choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}],)" +
           std::string(member) + ":" + std::string(object) + "}";
  };
  const std::string vllm = R"({"prompt_tokens":23,"total_tokens":24,"completion_tokens":1})";
  struct variant {
    std::string member, remembered, object;
    bool from_memory;
  };
  const variant variants[] = {
      {R"("usage")", vllm, R"({"prompt_tokens":23,"total_tokens":25,"completion_tokens":2})", true},
      {R"("usage")", vllm,
       R"({"prompt_tokens":7,"total_tokens":999999999999999999,"completion_tokens":0})", true},
      {R"("usage")", vllm, R"({"prompt_tokens":23,"total_tokens":25,"completion_tokens":-2})",
       false},
      {R"("usage")", vllm, R"({"prompt_tokens":23,"total_tokens":25,"completion_tokens":2.5})",
       false},
      {R"("usage")", vllm, R"({"prompt_tokens":23,"total_tokens":25,"completion_tokens":1e1})",
       false},
      {R"("usage")", vllm, R"({"prompt_tokens":23,"total_tokens":25,"completion_tokens":02})",
       false},  // not JSON
      {R"("usage")", vllm, R"({"prompt_tokens":23,"total_tokens":25,"completion_tokens":null})",
       false},
      {R"("usage")", vllm, R"({"prompt_tokens":23,"total_tokens":25,"completion_tokens":"2"})",
       false},
      {R"("usage")", vllm,
       R"({"prompt_tokens":23,"total_tokens":1000000000000000000,"completion_tokens":2})", false},
      {R"("usage")", vllm, R"({"total_tokens":25,"prompt_tokens":23,"completion_tokens":2})",
       false},
      {R"("usage")", vllm,
       R"({"prompt_tokens":23,"total_tokens":25,"completion_tokens":2,"more":1})", false},
      {R"("usage")", vllm,
       R"({"prompt_tokens":23,"total_tokens":25,"completion_tokens":2,"completion_tokens":3})",
       false},
      {R"("usage")", vllm, "null", false},
      {R"("usage")", R"({"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":null})",
       R"({"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":null})", true},
      {R"("usage")", R"({"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7})",
       R"({"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":8})", false},
      {R"("usage")", R"({"prompt_tokens":5,"details":{"n":1}})",
       R"({"prompt_tokens":6,"details":{"n":1}})", false},
      {R"("stats")", R"({"n":1,"m":2})", R"({"n":3,"m":4})", true},
      {R"("stats")", R"({"n":1,"s":"{"})", R"({"n":3,"s":"{"})", false},
      {R"("stats")", "{}", "{}", true},  // nothing varies: the chunk as remembered
  };
  for (const auto& v : variants)
    expect_read_after(counted(v.member, v.remembered), counted(v.member, v.object), v.from_memory);
  // The counts read are this chunk's, not the remembered one's.
  chat_chunk_reader reader;
  chat_chunk c;
  ASSERT_TRUE(reader.read(counted(R"("usage")", vllm), c));
  ASSERT_TRUE(reader.read(
      counted(R"("usage")", R"({"prompt_tokens":23,"total_tokens":64,"completion_tokens":41})"),
      c));
  EXPECT_EQ(reader.remembered_reads(), 1u);
  EXPECT_TRUE(c.usage);
  EXPECT_EQ(c.prompt_tokens, 23);
  EXPECT_EQ(c.completion_tokens, 41);
  // vLLM's fixture: every token chunk after the first from memory.
  chat_chunk_reader fixture_reader;
  auto stream = fixture_chunks("vllm-chat.sse");
  read_both_ways(fixture_reader, stream);
  EXPECT_EQ(fixture_reader.remembered_reads(), 16u) << "of " << stream.size() << " chunks";
}

// The holes are walked back over the chunk's last members, up to six, so
// that a stamp after OpenAI's padding or after usage in every chunk (the
// benchmark's tools stamp every chunk) leaves both holes; the walk stops
// at a member of another kind, whose bytes must then repeat.
TEST(ChatChunk, SeveralVaryingMembersAtTheEndAreReadFromMemory) {
  auto tail = [](std::string_view members) {
    return R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1796139637,"model":"demo",)"
           R"("choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}],)" +
           std::string(members) + "}";
  };
  struct variant {
    std::string remembered, members;
    bool from_memory;
  };
  const variant variants[] = {
      {R"("obfuscation":"kP2","demo_sent_us":57160475557)",
       R"("obfuscation":"v8xQ","demo_sent_us":57160475582)", true},
      {R"("usage":{"prompt_tokens":3,"completion_tokens":1},"demo_sent_us":5)",
       R"("usage":{"prompt_tokens":3,"completion_tokens":2},"demo_sent_us":6)", true},
      {R"("a":1,"b":"x","c":{"d":2},"e":3)", R"("a":9,"b":"yz","c":{"d":8},"e":7)", true},
      {R"("usage":null,"obfuscation":"a")", R"("usage":null,"obfuscation":"bc")", true},
      {R"("m":[1],"obfuscation":"a")", R"("m":[2],"obfuscation":"bc")",
       false},  // the walk stopped at the array
      {R"("m":[1],"obfuscation":"a")", R"("m":[1],"obfuscation":"bc")", true},
      // Seven counts and a stamp: the stamp is a hole, the counts (one
      // too many) are not.
      {R"("u":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7},"s":1)",
       R"("u":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7},"s":2)", true},
      {R"("u":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7},"s":1)",
       R"("u":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":8},"s":2)", false},
      {R"("obfuscation":"kP2","demo_sent_us":1)", R"("obfuscation":"a\"b","demo_sent_us":2)",
       false},
      {R"("obfuscation":"kP2","demo_sent_us":1)", R"("demo_sent_us":2,"obfuscation":"a")", false},
  };
  for (const auto& v : variants)
    expect_read_after(tail(v.remembered), tail(v.members), v.from_memory);
}

// OpenAI's tool calls: a function's non-empty name or arguments make the
// event a tool call, as the full parse finds (an observer without the lean
// reader); every shape here must give the same kinds both ways.
TEST(ChatChunk, ReadsToolCallsAsTheFullParseDoes) {
  struct variant {
    std::string delta;
    bool lean;
  };
  const variant variants[] = {
      {R"("tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}])",
       true},
      {R"("tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Par"}}])", true},
      {R"("tool_calls":[{"index":0,"function":{"arguments":""}}])", true},  // nothing yet: no kind
      {R"("tool_calls":[{"index":0,"function":{"name":""}}])", true},
      {R"("tool_calls":[{"index":1,"function":{"arguments":"x"}},{"index":2,"function":{"name":"f"}}])",
       true},
      {R"("tool_calls":[])", true},
      {R"("tool_calls":null)", true},  // not an array: no calls
      {R"("tool_calls":[7,"x",{"function":null},{"function":{"arguments":3}}])",
       true},  // nothing a call counts
      {R"("content":null,"tool_calls":[{"index":0,"function":{"arguments":"1"}}])", true},
      {R"("tool_calls":[{"index":0,"function":{"arguments":"\ud83d\ude00"}}])",
       false},  // surrogates
      {R"("tool_calls":[{"function":{"arguments":"a","arguments":"b"}}])", false},
  };
  for (const auto& v : variants) {
    const auto data = demo_chunk(v.delta);
    stream_observer lean{dialect::openai_chat, false, true},
        full{dialect::openai_chat, false, false};
    lean.on_event(sse_event{"message", data});
    full.on_event(sse_event{"message", data});
    EXPECT_EQ(lean.last_kinds(), full.last_kinds()) << data;
    EXPECT_EQ(lean.fast_path_events(), v.lean ? 1u : 0u) << data;
  }
}

// A tool call's arguments arrive in many small chunks that differ only in
// the fragment: they are read from memory like content, and each reads as
// a fresh read does. A chunk whose name also decides `tool_call` is never
// remembered (an empty fragment beside it would still be a tool call).
TEST(ChatChunk, ToolArgumentFragmentsAreReadFromMemoryWithTheSameResult) {
  auto call = [](std::string_view function) {
    return demo_chunk(R"("tool_calls":[{"index":0,"function":{)" + std::string(function) + "}}]");
  };
  std::vector<std::string> stream{call(R"("name":"get_weather","arguments":"")"),
                                  call(R"("name":"get_weather","arguments":"")")};
  for (std::string_view fragment : {R"({\"ci)", R"(ty\": )", "", R"(\"Par\u00eds\"})"})
    stream.push_back(call(R"("arguments":")" + std::string(fragment) + "\""));
  stream.push_back(demo_chunk(R"("content":"done")"));
  chat_chunk_reader reader;
  read_both_ways(reader, stream);
  // Both named chunks and the first fragment are read in full, the other
  // three fragments from memory; the content chunk has another shape.
  EXPECT_EQ(reader.remembered_reads(), 3u);
  chat_chunk empty;
  ASSERT_TRUE(reader.read(call(R"("arguments":"")"), empty));
  EXPECT_FALSE(empty.choices[0].tool_call);
  chat_chunk some;
  ASSERT_TRUE(reader.read(call(R"("arguments":"1")"), some));
  EXPECT_TRUE(some.choices[0].tool_call);
}

// A reasoning model's thinking is most of its tokens: its chunks are read
// from memory like content, in both spellings, each as a fresh read reads
// it; where the thinking ends and the answer begins, the answer's shape is
// learnt once. A chunk with two strings (thinking and content) is never
// remembered: either could decide a flag.
TEST(ChatChunk, ReasoningChunksAreReadFromMemoryWithTheSameResult) {
  for (std::string_view field : {"reasoning_content", "reasoning"}) {
    SCOPED_TRACE(field);
    auto thinking = [&](std::string_view text) {
      return demo_chunk(R"("content":null,")" + std::string(field) + R"(":")" + std::string(text) +
                        "\"");
    };
    auto answer = [&](std::string_view text) {
      return demo_chunk(R"("content":")" + std::string(text) + R"(",")" + std::string(field) +
                        R"(":null)");
    };
    std::vector<std::string> stream{demo_chunk(R"("role":"assistant","content":"")")};
    for (std::string_view word : {"Okay", ",", "", R"( \"so\")", " 日本", R"(\n)"})
      stream.push_back(thinking(word));
    for (std::string_view word : {"Blue", "", " sky"}) stream.push_back(answer(word));
    stream.push_back(demo_chunk(R"("content":"x",")" + std::string(field) + R"(":"y")"));
    stream.push_back(answer("again"));
    chat_chunk_reader reader;
    read_both_ways(reader, stream);
    // Read in full: the role chunk, the first thinking chunk, the first
    // answer chunk and the one with both strings; the rest from memory.
    EXPECT_EQ(reader.remembered_reads(), stream.size() - 4);

    chat_chunk c;
    ASSERT_TRUE(reader.read(thinking("t"), c));  // learnt again...
    ASSERT_TRUE(reader.read(thinking(""), c));   // ...then from memory
    EXPECT_EQ(reader.remembered_reads(), stream.size() - 3);
    EXPECT_FALSE(c.choices[0].reasoning);
    EXPECT_FALSE(c.choices[0].text);
    ASSERT_TRUE(reader.read(thinking("u"), c));
    EXPECT_TRUE(c.choices[0].reasoning);
    EXPECT_FALSE(c.choices[0].text);
  }
  // Both fixtures of reasoning models: every chunk but those that change
  // shape (the role, the first of the thinking and of the answer, the
  // finish, the usage) from memory.
  for (auto [name, expected] :
       {std::pair{"openai-chat-reasoning.sse", 24u}, std::pair{"vllm-chat-reasoning.sse", 17u}}) {
    SCOPED_TRACE(name);
    chat_chunk_reader reader;
    auto stream = fixture_chunks(name);
    read_both_ways(reader, stream);
    EXPECT_EQ(reader.remembered_reads(), expected) << "of " << stream.size() << " chunks";
  }
}

// Anthropic's text, thinking and tool-argument deltas, read without a document where they
// are exactly the API's shape; whatever the lean reader says, the full parse
// (an observer without it) finds the same kinds.
TEST(ChatChunk, ReadsAnthropicDeltasAsTheFullParseDoes) {
  struct variant {
    std::string data;
    bool lean;
  };
  const std::string text =
      R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":")";
  const std::string thinking =
      R"({"type":"content_block_delta","index":3,"delta":{"type":"thinking_delta","thinking":")";
  const std::string json =
      R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":")";
  const variant variants[] = {
      {text + R"(Hello"}})", true},
      {text + R"("}})", true},  // empty: no kind
      {text + R"(h\u00e9 \"\u2603\" \n)" + "\xE6\x97\xA5" + R"("}})", true},
      {thinking + R"(Let me think"}})", true},
      {R"({"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":"x"}})",
       true},
      {R"({"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"x"}})",
       false},  // not JSON
      {R"({"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"x"}})",
       false},
      {R"({"type": "content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}})",
       false},  // blanks
      {text + R"(x"}} )", false},
      {thinking + R"(x"}         })", true},  // Anthropic's padding before the last brace
      {text + "x\"}\n\t\r }", true},
      {text + R"(x" }})", false},  // elsewhere: the full parse's
      {text + R"(x"} } )", false},
      {text + R"(x"},"error":{"type":"overloaded_error"}})",
       false},                               // another member: the full parse decides
      {text + R"(a"b"}})", false},           // a bare quote inside
      {text + R"(ab\"}})", false},           // the closing quote escaped
      {text + R"(\ud83d\ude00"}})", false},  // surrogates
      {text + "\xC0\xAF\"}}", false},        // overlong UTF-8
      {json + R"({\"city\": \"Par"}})", true},
      {json + R"("}})", true},  // an empty fragment: no kind
      {json + R"(x", "extra": 1}})", false},
      {R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x","citations":[]}})",
       false},
  };
  for (const auto& v : variants) {
    unsigned lean_kinds = 999;
    EXPECT_EQ(read_anthropic_delta(v.data, lean_kinds), v.lean) << v.data;
    stream_observer lean{dialect::anthropic_messages, false, true},
        full{dialect::anthropic_messages, false, false};
    lean.on_event(sse_event{"content_block_delta", v.data});
    full.on_event(sse_event{"content_block_delta", v.data});
    EXPECT_EQ(lean.last_kinds(), full.last_kinds()) << v.data;
    EXPECT_EQ(lean.fast_path_events(), v.lean ? 1u : 0u) << v.data;
    if (v.lean) {
      EXPECT_EQ(lean_kinds, full.last_kinds()) << v.data;
    }
  }
  // An error event is never read the lean way, whatever its data.
  stream_observer lean{dialect::anthropic_messages, false, true};
  lean.on_event(sse_event{"error", text + R"(x"}})"});
  EXPECT_EQ(lean.fast_path_events(), 0u);
  EXPECT_TRUE(lean.facts().error);
}

}  // namespace
}  // namespace tokengate::stream
