// The one writer of /metrics: a family's HELP and TYPE once before its
// samples, label values and HELP text escaped as the text format asks,
// values written as the page always wrote them, and histograms' buckets.
#include "metrics/prometheus_text.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>

namespace tokengate::metrics {
namespace {

std::size_t occurrences_in_page(const std::string& text, std::string_view what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(PrometheusText, AFamilyHasOneHelpAndOneTypeBeforeAllItsSamples) {
  prometheus_text out;
  out.family("tokengate_things_total", metric_type::counter, "Things, by kind.");
  out.sample({{"kind", "a"}}, 1);
  out.sample({{"kind", "b"}}, 2);
  out.sample({{"kind", "c"}}, 3);
  out.family("tokengate_open", metric_type::gauge, "Open now.");
  out.sample(7);
  EXPECT_EQ(out.text(),
            "# HELP tokengate_things_total Things, by kind.\n"
            "# TYPE tokengate_things_total counter\n"
            "tokengate_things_total{kind=\"a\"} 1\n"
            "tokengate_things_total{kind=\"b\"} 2\n"
            "tokengate_things_total{kind=\"c\"} 3\n"
            "# HELP tokengate_open Open now.\n"
            "# TYPE tokengate_open gauge\n"
            "tokengate_open 7\n");
  EXPECT_EQ(occurrences_in_page(out.text(), "# HELP tokengate_things_total "), 1u);
  EXPECT_EQ(occurrences_in_page(out.text(), "# TYPE tokengate_things_total "), 1u);
}

TEST(PrometheusText, AFamilyWithoutSamplesIsStillDeclared) {
  prometheus_text out;
  out.family("tokengate_expiry_seconds", metric_type::gauge, "When it expires.");
  EXPECT_EQ(out.text(),
            "# HELP tokengate_expiry_seconds When it expires.\n"
            "# TYPE tokengate_expiry_seconds gauge\n");
}

TEST(PrometheusText, LabelValuesEscapeBackslashQuoteAndNewline) {
  labels set{{"route", "a\\b"}, {"model", "say \"hi\""}, {"upstream", "two\nlines"}};
  EXPECT_EQ(set.text(), R"(route="a\\b",model="say \"hi\"",upstream="two\nlines")");
  // Nothing else: commas, braces, spaces, tabs and UTF-8 pass as they are.
  EXPECT_EQ(labels({{"name", "a,b} c\td é"}}).text(), "name=\"a,b} c\td é\"");
  EXPECT_EQ(labels({{"name", ""}}).text(), "name=\"\"");
}

TEST(PrometheusText, HelpEscapesBackslashAndNewlineButNotQuotes) {
  prometheus_text out;
  out.family("x", metric_type::counter, "a \\ b\n\"c\"");
  EXPECT_EQ(out.text(), "# HELP x a \\\\ b\\n\"c\"\n# TYPE x counter\n");
}

TEST(PrometheusText, LabelsAddedInOrderAndWithLeavesTheSetAsItWas) {
  labels base{{"route", "r"}};
  auto more = base.with("outcome", "success");
  EXPECT_EQ(base.text(), "route=\"r\"");
  EXPECT_EQ(more.text(), "route=\"r\",outcome=\"success\"");
  EXPECT_EQ(labels().add("b", "1").add("a", "2").text(), "b=\"1\",a=\"2\"");
  EXPECT_TRUE(labels().empty());
}

// The latency families have always listed their label sets in the order
// of their text: "a!" (whose '!' sorts before the closing quote) before "a".
TEST(PrometheusText, LabelSetsOrderAsTheirText) {
  std::map<labels, int> sets;
  for (const char* route : {"a", "a!", "ab", "a b"}) sets[{{"route", route}}] = 0;
  std::vector<std::string> order;
  for (const auto& [set, n] : sets) order.push_back(set.text());
  EXPECT_EQ(order, (std::vector<std::string>{"route=\"a b\"", "route=\"a!\"", "route=\"a\"",
                                             "route=\"ab\""}));
}

TEST(PrometheusText, ValuesAreWrittenAsThePageAlwaysWroteThem) {
  EXPECT_EQ(sample_value(0).text(), "0");
  EXPECT_EQ(sample_value(std::numeric_limits<std::uint64_t>::max()).text(), "18446744073709551615");
  EXPECT_EQ(sample_value(-5LL).text(), "-5");
  // fixed: std::to_string(double), C's %f.
  EXPECT_EQ(sample_value::fixed(0.25).text(), "0.250000");
  EXPECT_EQ(sample_value::fixed(1.5e9 / 1e9).text(), std::to_string(1.5));
  EXPECT_EQ(sample_value::fixed(4846.6643971).text(), "4846.664397");
  EXPECT_EQ(sample_value::fixed(1e300).text(), std::to_string(1e300)) << "longer than 32 bytes";
  // general: an ostream's default, C's %g.
  EXPECT_EQ(sample_value::general(0.25).text(), "0.25");
  EXPECT_EQ(sample_value::general(0).text(), "0");
  EXPECT_EQ(sample_value::general(0.00005).text(), "5e-05");
  EXPECT_EQ(sample_value::general(1634.1834).text(), "1634.18");
  EXPECT_EQ(sample_value::general(1234567.0).text(), "1.23457e+06");
}

TEST(PrometheusText, AHistogramWritesCumulativeBucketsThenSumAndCount) {
  constexpr std::array<double, 4> bounds{0.005, 0.1, 1, 2.5};
  constexpr std::array<std::uint64_t, 5> counts{1, 0, 2, 0, 3};  // the last one past 2.5
  prometheus_text out;
  out.family("tokengate_wait_seconds", metric_type::histogram, "Waits.");
  out.histogram({{"route", "r"}}, bounds, counts, sample_value::fixed(1.5), 7);
  out.histogram({{"route", "s"}}, bounds, std::array<std::uint64_t, 5>{}, sample_value::general(0),
                0);
  EXPECT_EQ(out.text(),
            "# HELP tokengate_wait_seconds Waits.\n"
            "# TYPE tokengate_wait_seconds histogram\n"
            "tokengate_wait_seconds_bucket{route=\"r\",le=\"0.005\"} 1\n"
            "tokengate_wait_seconds_bucket{route=\"r\",le=\"0.1\"} 1\n"
            "tokengate_wait_seconds_bucket{route=\"r\",le=\"1\"} 3\n"
            "tokengate_wait_seconds_bucket{route=\"r\",le=\"2.5\"} 3\n"
            "tokengate_wait_seconds_bucket{route=\"r\",le=\"+Inf\"} 6\n"
            "tokengate_wait_seconds_sum{route=\"r\"} 1.500000\n"
            "tokengate_wait_seconds_count{route=\"r\"} 7\n"
            "tokengate_wait_seconds_bucket{route=\"s\",le=\"0.005\"} 0\n"
            "tokengate_wait_seconds_bucket{route=\"s\",le=\"0.1\"} 0\n"
            "tokengate_wait_seconds_bucket{route=\"s\",le=\"1\"} 0\n"
            "tokengate_wait_seconds_bucket{route=\"s\",le=\"2.5\"} 0\n"
            "tokengate_wait_seconds_bucket{route=\"s\",le=\"+Inf\"} 0\n"
            "tokengate_wait_seconds_sum{route=\"s\"} 0\n"
            "tokengate_wait_seconds_count{route=\"s\"} 0\n");
  EXPECT_EQ(occurrences_in_page(out.text(), "# HELP"), 1u);
}

TEST(PrometheusText, AHistogramWithoutLabelsHasOnlyLeOnItsBuckets) {
  constexpr std::array<double, 2> bounds{0.00005, 10};
  constexpr std::array<std::uint64_t, 3> counts{0, 1, 0};
  prometheus_text out;
  out.family("e", metric_type::histogram, "Errors.");
  out.histogram({}, bounds, counts, sample_value::fixed(0.2), 1);
  EXPECT_EQ(out.text(),
            "# HELP e Errors.\n# TYPE e histogram\n"
            "e_bucket{le=\"5e-05\"} 0\n"
            "e_bucket{le=\"10\"} 1\n"
            "e_bucket{le=\"+Inf\"} 1\n"
            "e_sum 0.200000\n"
            "e_count 1\n");
}

TEST(PrometheusText, TakeHandsOverTheText) {
  prometheus_text out;
  out.family("x", metric_type::gauge, "X.");
  out.sample(1);
  auto text = out.take();
  EXPECT_EQ(text, "# HELP x X.\n# TYPE x gauge\nx 1\n");
}

}  // namespace
}  // namespace tokengate::metrics
