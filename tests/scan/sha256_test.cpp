// scan/sha256: the published test vectors, and the same digests from
// several threads at once (each keeps its own context).
#include "scan/sha256.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace {

using tokengate::sha256_hex;

const std::string million_a(1'000'000, 'a');

TEST(Sha256, PublishedVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(million_a),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, ThreadsAtOnceEachGetTheirOwnDigests) {
  std::vector<std::string> seen(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < seen.size(); ++t)
    threads.emplace_back([&, t] {
      auto text = t % 2 ? std::string_view("abc") : std::string_view(million_a).substr(0, 1000 + t);
      auto first = sha256_hex(text);
      for (int round = 1; round < 200 && first != "changed"; ++round)
        if (sha256_hex(text) != first) first = "changed";
      seen[t] = first;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(seen[1], sha256_hex("abc"));
  EXPECT_EQ(seen[3], sha256_hex("abc"));
  EXPECT_EQ(seen[0], sha256_hex(million_a.substr(0, 1000)));
  EXPECT_EQ(seen[2], sha256_hex(million_a.substr(0, 1002)));
}

}  // namespace
