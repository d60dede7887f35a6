// W3C traceparent read and written, and the trace a request begins.
#include "http/trace_context.hpp"

#include <gtest/gtest.h>

namespace tokengate {
namespace {

TEST(TraceParent, ReadsTheSpecsExample) {
  auto p = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(p);
  EXPECT_EQ(to_hex(p->trace), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(to_hex(p->parent), "00f067aa0ba902b7");
  EXPECT_TRUE(p->sampled);
  EXPECT_EQ(format_traceparent(p->trace, p->parent, true),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  EXPECT_FALSE(
      parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")->sampled);
  // A later version may add fields after a dash.
  EXPECT_TRUE(parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what"));
}

TEST(TraceParent, RefusesWhatTheSpecRefuses) {
  for (const char* bad : {
           "",
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero parent
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version ff
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // upper case
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // 00 with more
           "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",    // misplaced dash
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
       })
    EXPECT_FALSE(parse_traceparent(bad)) << bad;
}

TEST(TraceState, GoesOnWithinTheSpecsBounds) {
  EXPECT_EQ(bounded_tracestate("a=1,b=2"), "a=1,b=2");
  EXPECT_EQ(bounded_tracestate(""), "");
  // Past 512 bytes: whole members from the first, as many as fit.
  const std::string big =
      "a=" + std::string(300, 'x') + ",b=" + std::string(150, 'y') + ",c=" + std::string(100, 'z');
  EXPECT_EQ(bounded_tracestate(big), big.substr(0, big.find(",c=")));
  EXPECT_EQ(bounded_tracestate("a=" + std::string(600, 'x')), "");
  // 32 members go on; 33 make the header invalid.
  std::string members;
  for (int i = 0; i < 32; ++i)
    members += (i ? "," : "") + std::string("v") + std::to_string(i) + "=1";
  EXPECT_EQ(bounded_tracestate(members), members);
  EXPECT_EQ(bounded_tracestate(members + ",w=1"), "");
  EXPECT_EQ(bounded_tracestate("a=1, ,b=2"), "a=1, ,b=2");  // (empty members are allowed)
}

TEST(TraceParent, ATraceContinuesTheClientsOrStartsWithTheRatio) {
  auto continued =
      begin_trace("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a=1", 0.0);
  EXPECT_TRUE(continued.sampled);  // the parent decides, not the ratio
  EXPECT_EQ(to_hex(continued.trace), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(to_hex(continued.parent), "00f067aa0ba902b7");
  EXPECT_NE(continued.span, continued.parent);
  EXPECT_EQ(continued.tracestate, "a=1");
  auto started = begin_trace("garbage", "a=1", 1.0);
  EXPECT_TRUE(started.sampled);
  EXPECT_EQ(started.parent, span_id{});
  EXPECT_TRUE(started.tracestate.empty());  // (only with a valid traceparent)
  EXPECT_NE(started.trace, begin_trace("", "", 1.0).trace);
  EXPECT_FALSE(begin_trace("", "", 0.0).sampled);
  int sampled = 0;
  for (int i = 0; i < 2000; ++i) sampled += begin_trace("", "", 0.25).sampled;
  EXPECT_NEAR(sampled, 500, 100);
}

}  // namespace
}  // namespace tokengate
