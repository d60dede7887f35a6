// cache/key: which requests are one entry, and which are not cached.
#include "cache/key.hpp"

#include <gtest/gtest.h>

namespace {

using tokengate::cache::key_for;
using tokengate::cache::key_material;
namespace config = tokengate::config;

std::string key_of(std::string_view body, std::string_view identity = "key:a",
                   bool streamed = false, std::string_view path = "/v1/chat/completions") {
  config::cache_settings s;
  return key_for(s, key_material{identity, "route", "model", path, body, streamed}).key;
}

TEST(CacheKey, MembersInAnyOrderAndThoseThatDoNotChangeTheAnswerAreOneRequest) {
  auto a = key_of(R"({"model":"m","temperature":0,"messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a,
            key_of(R"({"messages":[{"content":"x","role":"user"}],"temperature":0,"model":"m"})"));
  EXPECT_EQ(
      a, key_of(R"({"model":"m","temperature":0,"stream_options":{"include_usage":true},)"
                R"("user":"u1","metadata":{"k":"v"},"messages":[{"role":"user","content":"x"}]})"));
  EXPECT_NE(a,
            key_of(R"({"model":"m","temperature":0,"messages":[{"role":"user","content":"y"}]})"));
  EXPECT_NE(
      a,
      key_of(
          R"({"model":"m","temperature":0,"max_tokens":5,"messages":[{"role":"user","content":"x"}]})"));
}

TEST(CacheKey, OneValueInAnyJsonSpellingIsOneRequestAndTextNeverPassesForStructure) {
  // the same number, string and escapes, however written
  EXPECT_EQ(key_of(R"({"temperature":0,"top_p":1,"content":"a\u0062"})"),
            key_of(R"({"temperature":0.0,"top_p":1.0,"content":"ab"})"));
  EXPECT_NE(key_of(R"({"temperature":0,"top_p":1})"), key_of(R"({"temperature":0,"top_p":1.5})"));
  // members or elements written inside a string stay that string
  EXPECT_NE(key_of(R"({"temperature":0,"a":"x","b":"y"})"),
            key_of(R"({"temperature":0,"a":"x\",\"b\":\"y"})"));
  EXPECT_NE(key_of(R"({"temperature":0,"stop":["a","b"]})"),
            key_of(R"({"temperature":0,"stop":["a\",\"b"]})"));
  EXPECT_NE(key_of(R"({"temperature":0,"stop":["1:a"]})"),
            key_of(R"({"temperature":0,"stop":[1,"a"]})"));
  // a value's type is part of it
  EXPECT_NE(key_of(R"({"temperature":0,"n":1})"), key_of(R"({"temperature":0,"n":"1"})"));
  EXPECT_NE(key_of(R"({"temperature":0,"n":null})"), key_of(R"({"temperature":0,"n":"null"})"));
  EXPECT_NE(key_of(R"({"temperature":0,"tools":[]})"), key_of(R"({"temperature":0,"tools":{}})"));
}

TEST(CacheKey, WhoAsksIsItsOwnButStreamedAndWholeShareWhereFormsAreRebuilt) {
  const std::string body = R"({"temperature":0,"messages":[]})";
  EXPECT_NE(key_of(body, "key:a"), key_of(body, "key:b"));
  for (auto path : {"/v1/chat/completions", "/v1/messages", "/v1/responses"})
    EXPECT_EQ(key_of(body, "key:a", false, path), key_of(body, "key:a", true, path)) << path;
  EXPECT_NE(key_of(body, "key:a", false, "/v1/messages"),
            key_of(body, "key:a", false, "/v1/responses"));
  // the legacy completions have no rebuilding: their forms stay apart
  EXPECT_NE(key_of(body, "key:a", false, "/v1/completions"),
            key_of(body, "key:a", true, "/v1/completions"));
}

TEST(CacheKey, OnlyDeterministicRequestsUnderModeDeterministic) {
  config::cache_settings s;
  auto reason = [&](std::string_view body) {
    return std::string(key_for(s, key_material{"i", "r", "m", "/p", body, false}).not_cached);
  };
  EXPECT_EQ(reason(R"({"messages":[]})"), "mode");
  EXPECT_EQ(reason(R"({"temperature":0.7})"), "mode");
  EXPECT_EQ(reason(R"({"temperature":0.0})"), "");
  EXPECT_EQ(reason(R"({"seed":3,"temperature":1})"), "");
  EXPECT_EQ(reason(R"({"seed":null})"), "mode");
  EXPECT_EQ(reason("[1,2]"), "body");
  EXPECT_EQ(reason("not json"), "body");
  s.mode = config::cache_mode::always;
  EXPECT_EQ(reason(R"({"temperature":0.7})"), "");
}

}  // namespace
