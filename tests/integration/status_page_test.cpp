// The admin listener's status page and its feed, over real sockets: GET /
// with its policy and its own files (uPlot included), and /stats/stream, a
// /stats snapshot a second, behind the admin token when one is set, bounded
// in number and ended by its client's close. The page in a browser:
// tests/status_page/.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <memory>
#include <regex>
#include <vector>

#include "support/proxy_fixture.hpp"

namespace tokengate::test {
namespace {

namespace json = boost::json;

std::string get_request(const std::string& path, const std::string& extra_headers = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers + "\r\n";
}

// A GET on the admin port with extra header lines, answered whole.
http_response admin_get(const proxy_fixture& f, const std::string& path,
                        const std::string& extra_headers = "") {
  http_client c(f.admin_port());
  c.send(get_request(path, extra_headers));
  return read_response(c, 5s);
}

struct feed_event {
  clock::time_point arrived;
  json::object snapshot;
};

// A feed's events so far (the `data:` of each, parsed), when each arrived.
std::vector<feed_event> events_of(const http_client& c) {
  std::vector<feed_event> events;
  const auto& raw = c.raw();
  for (auto at = raw.find("\ndata: "); at != std::string::npos; at = raw.find("\ndata: ", at + 1)) {
    auto end = raw.find("\n\n", at + 1);
    if (end == std::string::npos) break;
    events.push_back(
        {c.arrival_of(end + 1), json::parse(raw.substr(at + 7, end - at - 7)).as_object()});
  }
  return events;
}

// Reads a feed until it has `n` events (or `timeout` passes).
testing::AssertionResult read_events(http_client& c, std::size_t n,
                                     std::chrono::milliseconds timeout) {
  auto deadline = clock::now() + timeout;
  while (events_of(c).size() < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0 || !c.read_some(left))
      return testing::AssertionFailure()
             << "feed has " << events_of(c).size() << " events of " << n << ":\n"
             << c.raw().substr(0, 400);
  }
  return testing::AssertionSuccess();
}

std::uint64_t open_feeds(const proxy_fixture& f) {
  auto stats = json::parse(http_get(f.admin_port(), "/stats").body);
  return stats.at("process").at("admin").at("feeds").to_number<std::uint64_t>();
}

TEST(StatusPage, TheFeedSendsASnapshotEverySecond) {
  proxy_fixture f;
  http_client c(f.admin_port());
  c.send(get_request("/stats/stream"));
  ASSERT_TRUE(read_events(c, 3, 4s));
  EXPECT_EQ(c.raw().rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << c.raw().substr(0, 200);
  EXPECT_NE(c.raw().find("Content-Type: text/event-stream\r\n"), std::string::npos);
  EXPECT_NE(c.raw().find("\r\n\r\nretry: 2000\n"), std::string::npos);
  auto events = events_of(c);
  for (std::size_t i = 1; i < 3; ++i) {
    auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(events[i].arrived -
                                                                     events[i - 1].arrived);
    EXPECT_GE(gap.count(), 800) << "event " << i;
    EXPECT_LE(gap.count(), 1300) << "event " << i;
  }
  for (const auto& e : events) {
    EXPECT_EQ(e.snapshot.at("version").to_number<int>(), 1);
    EXPECT_TRUE(e.snapshot.at("routes").is_object());
    EXPECT_TRUE(e.snapshot.at("replicas").is_object());
    EXPECT_EQ(e.snapshot.at("process").at("admin").at("feeds").to_number<int>(), 1);
  }
}

TEST(StatusPage, ClosingTheClientEndsItsFeed) {
  proxy_fixture f;
  auto c = std::make_unique<http_client>(f.admin_port());
  c->send(get_request("/stats/stream"));
  ASSERT_TRUE(read_events(*c, 1, 2s));
  EXPECT_EQ(open_feeds(f), 1u);
  c->close();
  // (Seen at once, not at the next second's write.)
  EXPECT_TRUE(wait_until([&] { return open_feeds(f) == 0; }, 500ms, "the feed to end"));
}

// A feed still open when the server stops neither holds the drain nor
// outlives the listener (its frame goes with the worker's io_context).
TEST(StatusPage, AnOpenFeedDoesNotHoldTheDrain) {
  std::unique_ptr<http_client> c;
  auto started = clock::now();
  {
    proxy_fixture f;
    c = std::make_unique<http_client>(f.admin_port());
    c->send(get_request("/stats/stream"));
    ASSERT_TRUE(read_events(*c, 1, 2s));
    started = clock::now();
  }
  EXPECT_LT(clock::now() - started, 1s);
  EXPECT_FALSE(c->read_some(1s));  // closed
  EXPECT_TRUE(c->eof());
}

TEST(StatusPage, TheSeventeenthFeedIsRefused) {
  proxy_fixture f;
  std::vector<std::unique_ptr<http_client>> feeds;
  for (int i = 0; i < 16; ++i) {
    feeds.push_back(std::make_unique<http_client>(f.admin_port()));
    feeds.back()->send(get_request("/stats/stream"));
    ASSERT_TRUE(read_events(*feeds.back(), 1, 2s)) << "feed " << i;
  }
  auto refused = admin_get(f, "/stats/stream");
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(error_code_of(refused), "too_many_feeds");
  EXPECT_EQ(refused.headers["retry-after"], "5");
  // One closed, one more may start.
  feeds.front()->close();
  ASSERT_TRUE(wait_until([&] { return open_feeds(f) == 15; }, 1s, "a feed to end"));
  http_client again(f.admin_port());
  again.send(get_request("/stats/stream"));
  EXPECT_TRUE(read_events(again, 1, 2s));
}

TEST(StatusPage, TheFeedNeedsTheAdminTokenWhenOneIsSet) {
  fixture_options o;
  o.top_extra = "  token: s3cret-admin\n";  // (under the fixture's admin:)
  proxy_fixture f(o);
  EXPECT_EQ(admin_get(f, "/stats/stream").status, 401);
  EXPECT_EQ(admin_get(f, "/stats/stream", "Authorization: Bearer wrong\r\n").status, 401);
  EXPECT_EQ(admin_get(f, "/stats").status, 401);
  http_client c(f.admin_port());
  c.send(get_request("/stats/stream", "Authorization: Bearer s3cret-admin\r\n"));
  EXPECT_TRUE(read_events(c, 1, 2s));
  // The page itself carries no data: it loads, then asks for the token.
  auto page = admin_get(f, "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.body.find("s3cret"), std::string::npos);
}

TEST(StatusPage, ThePageIsServedWithAStrictPolicyAndItsOwnFilesOnly) {
  proxy_fixture f;
  auto page = admin_get(f, "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.headers["content-type"], "text/html; charset=utf-8");
  const auto& csp = page.headers["content-security-policy"];
  for (const char* rule : {"default-src 'none'", "script-src 'self'", "style-src 'self'",
                           "connect-src 'self'", "img-src 'self' data:"})
    EXPECT_NE(csp.find(rule), std::string::npos) << rule << " in " << csp;
  EXPECT_EQ(page.headers["x-content-type-options"], "nosniff");
  // Every file it names is its own (a path on this listener, or data:),
  // and each is served.
  std::regex reference(R"re((src|href)="([^"]*)")re");
  int own = 0;
  for (std::sregex_iterator m(page.body.begin(), page.body.end(), reference), end; m != end; ++m) {
    auto url = (*m)[2].str();
    if (url.rfind("data:", 0) == 0) continue;
    ASSERT_EQ(url.rfind("/", 0), 0u) << url;
    ASSERT_NE(url.rfind("//", 0), 0u) << url;
    auto asset = admin_get(f, url);
    EXPECT_EQ(asset.status, 200) << url;
    EXPECT_EQ(asset.headers["content-security-policy"], csp) << url;
    ++own;
  }
  EXPECT_EQ(own, 4);  // uPlot's script and style, the page's own
  EXPECT_EQ(page.body.find("http://"), std::string::npos);
  EXPECT_EQ(page.body.find("https://"), std::string::npos);
  for (const char* path : {"/assets/status.js", "/assets/status.css"}) {
    auto body = admin_get(f, path).body;
    EXPECT_EQ(body.find("http://"), std::string::npos) << path;
    EXPECT_EQ(body.find("https://"), std::string::npos) << path;
  }
  auto uplot = admin_get(f, "/assets/uplot.js");
  EXPECT_EQ(uplot.headers["content-type"], "text/javascript; charset=utf-8");
  EXPECT_NE(uplot.body.find("var uPlot=function()"), std::string::npos);
  // Nothing there changes anything: GET (and HEAD) only.
  http_client post(f.admin_port());
  post.send(post_json("/", "{}"));
  EXPECT_EQ(read_response(post).status, 405);
}

TEST(StatusPage, StatsSayTheirVersionAndWhatThePageShows) {
  fixture_options o;
  o.top_extra =
      "  trace_url: https://tempo.example/trace/{trace_id}\n"
      "routes:\n"
      "  - {name: chat, models: ['*'], targets: [{upstream: demo}],\n"
      "     max_output_tokens: {default: 4, ceiling: 4, mode: clamp}}\n";
  proxy_fixture f(o);
  http_client c(f.port());
  c.send(post_json("/v1/chat/completions", R"({"model":"demo","stream":true,"max_tokens":50,)"
                                           R"("messages":[{"role":"user","content":"hi"}]})"));
  auto answer = read_response(c);
  ASSERT_EQ(answer.status, 200);
  json::object stats;
  // (The route is listed from the stream's start; the request is counted
  // just after its last byte.)
  ASSERT_TRUE(wait_until(
      [&] {
        stats = json::parse(http_get(f.admin_port(), "/stats").body).as_object();
        return !stats.at("slowest").as_array().empty();
      },
      2s, "the request to be recorded"));
  EXPECT_EQ(stats.begin()->key(), "version");
  EXPECT_EQ(stats.at("version").to_number<int>(), 1);
  const auto& chat = stats.at("routes").at("chat");
  EXPECT_EQ(chat.at("requests").at("success").to_number<int>(), 1);
  EXPECT_EQ(chat.at("tokens").at("output").to_number<int>(), 4);
  EXPECT_EQ(chat.at("limits").at("clamped").to_number<int>(), 1);
  EXPECT_TRUE(chat.at("ttft_us").at("since_start").is_object());
  const auto& demo = stats.at("upstreams").at("demo");
  EXPECT_EQ(demo.at("healthy"), true);
  EXPECT_TRUE(demo.at("health_check").is_null());
  const auto& slowest = stats.at("slowest").as_array();
  ASSERT_EQ(slowest.size(), 1u);
  EXPECT_EQ(slowest[0].at("route"), "chat");
  EXPECT_EQ(slowest[0].at("status").to_number<int>(), 200);
  EXPECT_EQ(slowest[0].at("request_id").as_string().size(), 32u);
  const auto& process = stats.at("process");
  EXPECT_EQ(process.at("version"), TOKENGATE_VERSION);
  EXPECT_EQ(process.at("config_file"), "fixture.yaml");
  EXPECT_EQ(process.at("admin").at("trace_url"), "https://tempo.example/trace/{trace_id}");
  EXPECT_EQ(std::string(process.at("listeners").at(0).at("url").as_string()),
            "http://127.0.0.1:" + std::to_string(f.port()) + "/v1");
}

TEST(StatusPage, StatsCountEachUpstreamsRetriesAndEachRoutesResumes) {
  fixture_options o;
  o.top_extra =
      "routes:\n"
      "  - {name: chat, models: ['*'], targets: [{upstream: demo}], retry_backoff: 1ms,\n"
      "     resume: {mode: restart}}\n";
  proxy_fixture f(o);
  auto ask = [&](const std::string& knobs) {
    http_client c(f.port());
    c.send(post_json("/v1/chat/completions",
                     R"({"model":"demo","stream":true,"max_tokens":20,"demo":)" + knobs +
                         R"(,"messages":[{"role":"user","content":"hi"}]})"));
    EXPECT_EQ(read_response(c).status, 200) << knobs;
  };
  ask(R"({"tokens":6,"status":500,"fail_times":1})");     // a 500, then the same target again
  ask(R"({"tokens":6,"reset_after":3,"fail_times":1})");  // reset mid-answer, then resumed
  json::object stats;
  ASSERT_TRUE(wait_until(
      [&] {
        stats = json::parse(http_get(f.admin_port(), "/stats").body).as_object();
        auto* resumes = stats.at("routes").at("chat").as_object().if_contains("resumes");
        return resumes && resumes->as_object().contains("completed");
      },
      2s, "the resume to be counted"));
  const auto& demo = stats.at("upstreams").at("demo");
  EXPECT_GE(demo.at("retries").to_number<int>(), 1);
  EXPECT_TRUE(demo.at("health_changed_unix_ms").is_null());  // (no check: never changed)
  EXPECT_EQ(stats.at("routes").at("chat").at("resumes").at("completed").to_number<int>(), 1);
}

}  // namespace
}  // namespace tokengate::test
