#include "metrics/latency.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cmath>

#include "metrics/prometheus_text.hpp"

namespace tokengate::metrics {

std::int64_t windowed_histogram::epoch_of(clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count() /
         slot_seconds;
}

void windowed_histogram::record(std::uint64_t micros, clock::time_point now) {
  all_.record(micros);
  auto epoch = epoch_of(now);
  auto& s = slots_[static_cast<std::size_t>(epoch % slot_count)];
  if (s.epoch.load(std::memory_order_relaxed) != epoch) {
    s.values.clear();  // a slot from an older lap of the ring
    s.epoch.store(epoch, std::memory_order_relaxed);
  }
  s.values.record(micros);
}

void windowed_histogram::read(merged_histogram& last_minute, merged_histogram& last_five,
                              merged_histogram& all, clock::time_point now) const {
  auto current = epoch_of(now);
  all.add(all_);
  for (const auto& s : slots_) {
    auto age = current - s.epoch.load(std::memory_order_relaxed);
    if (age < 0) continue;
    if (age < 60 / slot_seconds) last_minute.add(s.values);
    if (age < 300 / slot_seconds) last_five.add(s.values);
  }
}

series& latency_shard::series_for(std::string_view route, std::string_view model,
                                  std::string_view upstream) {
  thread_local std::string key;
  key.assign(route).append(1, '\x1f').append(model).append(1, '\x1f').append(upstream);
  if (auto it = series_.find(key); it != series_.end())
    return *it->second;  // the only writer: no lock to read
  std::lock_guard lock(insert_mutex_);
  auto& slot = series_[key];
  slot = std::make_unique<series>(std::string(route), std::string(model), std::string(upstream));
  return *slot;
}

route_windows& latency_shard::windows_for(std::string_view route) {
  if (auto it = routes_.find(route); it != routes_.end()) return *it->second;
  std::lock_guard lock(insert_mutex_);
  auto& slot = routes_[std::string(route)];
  slot = std::make_unique<route_windows>();
  return *slot;
}

namespace {

struct histogram_family {
  const char* name;
  const char* help;
  fixed_histogram series::*member;
  std::span<const double> bounds;
};

const histogram_family histogram_families[] = {
    {"tokengate_time_to_first_token_seconds",
     "Request fully read to first generated token written to the client.", &series::ttft,
     ttft_bounds},
    {"tokengate_upstream_time_to_first_token_seconds",
     "Request sent upstream to the first generated token received from it.", &series::upstream_ttft,
     ttft_bounds},
    {"tokengate_upstream_time_to_first_byte_seconds", "Request sent upstream to its response head.",
     &series::upstream_first_byte, ttft_bounds},
    {"tokengate_inter_token_latency_seconds", "Gaps between successive token events of a stream.",
     &series::inter_token, inter_token_bounds},
    {"tokengate_time_per_output_token_seconds",
     "(last token - first token) / (output tokens - 1), per stream.",
     &series::time_per_output_token, inter_token_bounds},
    {"tokengate_request_duration_seconds", "Request fully read to the last byte sent.",
     &series::duration, duration_bounds},
    {"tokengate_relay_delay_seconds",
     "Time the newest bytes of each upstream read spent in tokengate: arrival in the kernel to the "
     "write to the client.",
     &series::relay_delay, relay_delay_bounds},
    {"tokengate_stream_time_to_resume_seconds",
     "A stream resumed mid-answer: its upstream's failure seen to the next content written to the "
     "client.",
     &series::time_to_resume, ttft_bounds},
};

// A label set's series summed across workers.
struct merged_series {
  std::vector<std::vector<std::uint64_t>> buckets;  // per family
  std::vector<std::uint64_t> counts, sums;
  std::array<std::uint64_t, outcome_names.size()> requests{};
  std::uint64_t input = 0, output = 0, cache_read = 0, cache_write = 0;
};

void add_series(merged_series& m, const series& s) {
  m.buckets.resize(std::size(histogram_families));
  m.counts.resize(std::size(histogram_families));
  m.sums.resize(std::size(histogram_families));
  for (std::size_t f = 0; f < std::size(histogram_families); ++f) {
    const auto& h = s.*(histogram_families[f].member);
    m.buckets[f].resize(h.bounds().size() + 1);
    for (std::size_t b = 0; b <= h.bounds().size(); ++b) m.buckets[f][b] += h.bucket(b);
    m.counts[f] += h.count();
    m.sums[f] += h.sum_micros();
  }
  for (std::size_t o = 0; o < outcome_names.size(); ++o)
    m.requests[o] += s.requests[o].load(std::memory_order_relaxed);
  m.input += s.input_tokens.load(std::memory_order_relaxed);
  m.cache_read += s.cache_read_tokens.load(std::memory_order_relaxed);
  m.cache_write += s.cache_write_tokens.load(std::memory_order_relaxed);
  m.output += s.output_tokens.load(std::memory_order_relaxed);
}

// Keyed by the label set: the page lists them in the order of its text.
std::map<labels, merged_series> merge_series(const std::vector<const latency_shard*>& shards) {
  std::map<labels, merged_series> sets;
  for (const auto* shard : shards)
    shard->each_series([&](const series& s) {
      add_series(sets[{{"route", s.route}, {"model", s.model}, {"upstream", s.upstream}}], s);
    });
  return sets;
}

}  // namespace

std::string render_latency_prometheus(const std::vector<const latency_shard*>& shards) {
  const auto sets = merge_series(shards);
  prometheus_text out;
  for (std::size_t f = 0; f < std::size(histogram_families); ++f) {
    const auto& fam = histogram_families[f];
    out.family(fam.name, metric_type::histogram, fam.help);
    for (const auto& [set, m] : sets)
      out.histogram(set, fam.bounds, m.buckets[f],
                    sample_value::general(static_cast<double>(m.sums[f]) / 1e6), m.counts[f]);
  }
  out.family("tokengate_requests_total", metric_type::counter,
             "Requests by route, model, upstream and outcome.");
  for (const auto& [set, m] : sets)
    for (std::size_t o = 0; o < outcome_names.size(); ++o)
      out.sample(set.with("outcome", outcome_names[o]), m.requests[o]);
  out.family("tokengate_tokens_total", metric_type::counter,
             "Tokens by type, from the upstreams' usage (counted events where none); "
             "cache_read and cache_write are parts of input.");
  for (const auto& [set, m] : sets) {
    out.sample(set.with("type", "input"), m.input);
    out.sample(set.with("type", "output"), m.output);
    // (Only where a prompt cache was used: most routes never see one.)
    if (m.cache_read || m.cache_write) {
      out.sample(set.with("type", "cache_read"), m.cache_read);
      out.sample(set.with("type", "cache_write"), m.cache_write);
    }
  }
  return out.take();
}

namespace {

namespace json = boost::json;
constexpr std::size_t window_count = 5;
constexpr const char* window_names[window_count] = {
    "ttft_us", "inter_token_us", "time_per_output_token_us", "duration_us", "relay_delay_us"};

// A route across the shards: its windows read, its counts summed.
struct route_read {
  merged_histogram minute[window_count], five[window_count], all[window_count];
  std::array<std::uint64_t, outcome_names.size()> requests{};
  std::uint64_t input = 0, output = 0, clamped = 0, cut = 0;
  std::map<std::pair<std::string, std::string>, std::uint64_t> errors;  // (side, code)
};

std::map<std::string, route_read> read_routes(const std::vector<const latency_shard*>& shards,
                                              windowed_histogram::clock::time_point now) {
  std::map<std::string, route_read> routes;
  for (const auto* shard : shards) {
    shard->each_route([&](const std::string& name, const route_windows& w) {
      auto& r = routes[name];
      const windowed_histogram* hs[window_count] = {
          &w.ttft, &w.inter_token, &w.time_per_output_token, &w.duration, &w.relay_delay};
      for (std::size_t i = 0; i < window_count; ++i)
        hs[i]->read(r.minute[i], r.five[i], r.all[i], now);
      r.clamped += w.limit_clamped.get();
      r.cut += w.limit_cut.get();
      w.errors.each([&](std::string_view side, std::string_view code, std::uint64_t n) {
        r.errors[{std::string(side), std::string(code)}] += n;
      });
    });
    // (A route's label sets are made with its windows, by the same request.)
    shard->each_series([&](const series& s) {
      auto& r = routes[s.route];
      for (std::size_t o = 0; o < outcome_names.size(); ++o)
        r.requests[o] += s.requests[o].load(std::memory_order_relaxed);
      r.input += s.input_tokens.load(std::memory_order_relaxed);
      r.output += s.output_tokens.load(std::memory_order_relaxed);
    });
  }
  return routes;
}

// Integer microseconds: exact to read, and no exponent notation.
json::object summary(const merged_histogram& h) {
  auto us = [](double v) { return static_cast<std::int64_t>(std::llround(v)); };
  return json::object{{"count", h.total()},
                      {"p50", us(h.quantile(0.50))},
                      {"p95", us(h.quantile(0.95))},
                      {"p99", us(h.quantile(0.99))},
                      {"max", h.max()}};
}

// The route's counters since start (a reader takes rates from two reads).
void add_counts(json::object& route, const route_read& r) {
  json::object requests, errors;
  for (std::size_t o = 0; o < outcome_names.size(); ++o) requests[outcome_names[o]] = r.requests[o];
  for (const auto& [key, n] : r.errors) {
    auto& side = errors[key.first];
    if (!side.is_object()) side = json::object();
    side.as_object()[key.second] = n;
  }
  route["requests"] = std::move(requests);
  route["tokens"] = json::object{{"input", r.input}, {"output", r.output}};
  route["errors"] = std::move(errors);
  route["limits"] = json::object{{"clamped", r.clamped}, {"cut", r.cut}};
}

}  // namespace

std::string render_stats_json(const std::vector<const latency_shard*>& shards) {
  json::object out_routes;
  for (const auto& [name, r] : read_routes(shards, windowed_histogram::clock::now())) {
    json::object route;
    for (std::size_t i = 0; i < window_count; ++i)
      route[window_names[i]] = json::object{{"last_1m", summary(r.minute[i])},
                                            {"last_5m", summary(r.five[i])},
                                            {"since_start", summary(r.all[i])}};
    add_counts(route, r);
    out_routes[name] = std::move(route);
  }
  return json::serialize(json::object{{"routes", std::move(out_routes)}});
}

}  // namespace tokengate::metrics
