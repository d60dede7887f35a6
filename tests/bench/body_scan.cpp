// The request-body scan (routing::scan_object) alone, on 200 KB prompts of
// different kinds of text: English, other languages as UTF-8, the same as
// \u escapes (Python's json module by default), source code (a \n or \"
// every few dozen bytes) and emoji. Microseconds per body, each scanned 500
// times in a loop (the body stays in the cache: the proxy reads its bodies
// from the socket, so this is the scan's own cost, not the memory's). On
// demand, not a test; to compare two builds, build it against each:
//   g++ -std=c++20 -O2 -Iproxy tests/bench/body_scan.cpp build/libtokengate_core.a -o
//   /tmp/body_scan taskset -c 0 /tmp/body_scan
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "routing/json_scan.hpp"

namespace {

// A chat request whose one message is `unit` repeated to about `bytes`.
std::string body_of(const std::string& unit, std::size_t bytes) {
  std::string text;
  while (text.size() < bytes) text += unit;
  return R"({"model":"bench","messages":[{"role":"user","content":")" + text +
         R"("}],"max_tokens":20})";
}

}  // namespace

int main() {
  struct kind {
    const char* name;
    std::string unit;  // as it stands in the JSON text
  };
  const std::vector<kind> kinds{
      {"english", "The quick brown fox jumps over the lazy dog. "},
      {"french",
       "L'\xC3\xA9t\xC3\xA9 \xC3\xA0 P\xC3\xA9kin, o\xC3\xB9 l'on m\xC3\xA2"
       "che des cr\xC3\xAApes. "},
      {"russian", "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80 "},
      {"chinese",
       "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x8C\xE4\xBB\x8A\xE5\xA4\xA9\xE3"
       "\x80\x82"},
      {"chinese-escaped", R"(\u4f60\u597d\u4e16\u754c\uff0c\u4eca\u5929\u3002)"},
      {"french-escaped", R"(L'\u00e9t\u00e9 \u00e0 P\u00e9kin, o\u00f9 l'on m\u00e2che. )"},
      {"code", R"(    if (user.isActive()) {\n        return \"ok\";\n    }\n\tx = y;\n)"},
      {"emoji", "ok \xF0\x9F\x98\x80 fine \xF0\x9F\x8E\x89 "},
  };
  constexpr int rounds = 500;
  for (const auto& k : kinds) {
    auto body = body_of(k.unit, 200'000);
    tokengate::routing::scan_error error;
    if (!tokengate::routing::scan_object(body, error)) {
      std::printf("%s: not valid JSON at %zu: %s\n", k.name, error.offset, error.message.c_str());
      return 1;
    }
    auto start = std::chrono::steady_clock::now();
    std::size_t members = 0;
    for (int i = 0; i < rounds; ++i)
      members += tokengate::routing::scan_object(body, error)->members.size();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count() /
                rounds;
    std::printf("%-16s %7zu bytes %8.1f us/body %6.2f GB/s (%zu members)\n", k.name, body.size(),
                us, static_cast<double>(body.size()) / us / 1e3, members / rounds);
  }
}
