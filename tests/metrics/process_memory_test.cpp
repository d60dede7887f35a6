// The process's memory for /metrics: the fields read from /proc, and the
// two gauges.
#include "metrics/process_memory.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace tokengate::metrics {
namespace {

TEST(ProcessMemory, KilobyteFieldsAreReadByExactName) {
  const char* status =
      "Name:\ttokengate\nVmHWM:\t   41000 kB\nVmRSS:\t   39304 kB\nRssAnon:\t   31000 kB\n";
  EXPECT_EQ(kilobytes_field(status, "VmRSS"), 39304u * 1024);
  EXPECT_EQ(kilobytes_field(status, "VmHWM"), 41000u * 1024);
  EXPECT_EQ(kilobytes_field(status, "Rss"), std::nullopt) << "a prefix of another field's name";
  EXPECT_EQ(kilobytes_field(status, "LazyFree"), std::nullopt);
  const char* rollup =
      "Rss:               39304 kB\nLazyFree:          25560 kB";  // (no final newline)
  EXPECT_EQ(kilobytes_field(rollup, "LazyFree"), 25560u * 1024);
  EXPECT_EQ(kilobytes_field("VmRSS: lots\n", "VmRSS"), std::nullopt);
  EXPECT_EQ(kilobytes_field("VmRSS: 12 MB\n", "VmRSS"), std::nullopt);
  EXPECT_EQ(kilobytes_field("VmRSS:\n", "VmRSS"), std::nullopt);
}

// This process's own memory: resident grows when a block is touched; the
// lazily freed figure is there (Linux 4.14+), whatever it holds.
TEST(ProcessMemory, ThisProcessIsRead) {
  auto before = read_process_memory();
  ASSERT_TRUE(before.resident_bytes);
  EXPECT_TRUE(before.lazily_freed_bytes);
  constexpr std::size_t size = 64 << 20;
  auto* block = static_cast<char*>(std::malloc(size));
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, size);
  asm volatile("" : : "r"(block) : "memory");  // (the compiler may not drop the block as unused)
  auto after = read_process_memory();
  EXPECT_GE(*after.resident_bytes, *before.resident_bytes + size / 2);
  std::free(block);
}

TEST(ProcessMemory, BothGaugesAreDeclaredAndSampledWhereKnown) {
  auto text = render_process_memory_prometheus({123 * 1024, 45 * 1024});
  EXPECT_NE(
      text.find(
          "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 125952\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE tokengate_memory_lazily_freed_bytes "
                      "gauge\ntokengate_memory_lazily_freed_bytes 46080\n"),
            std::string::npos)
      << text;
  auto unknown = render_process_memory_prometheus({});
  EXPECT_NE(unknown.find("# TYPE tokengate_memory_lazily_freed_bytes gauge\n"), std::string::npos);
  EXPECT_EQ(unknown.find("\ntokengate_memory_lazily_freed_bytes "), std::string::npos) << unknown;
}

}  // namespace
}  // namespace tokengate::metrics
