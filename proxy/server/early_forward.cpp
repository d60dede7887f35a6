#include "server/early_forward.hpp"

#include <algorithm>
#include <boost/asio/read.hpp>

#include "config/reload.hpp"
#include "http/dialect.hpp"
#include "http/read_message.hpp"
#include "io/any_stream.hpp"
#include "io/write_all.hpp"
#include "routing/json_scan.hpp"
#include "routing/policy.hpp"
#include "server/fleet_choice.hpp"
#include "server/worker.hpp"
#include "translate/translation.hpp"
#include "upstream/pool.hpp"
#include "upstream/request.hpp"

namespace tokengate {
namespace {

// Shorter bodies are not worth the overlap.
constexpr std::size_t direct_from = 16 * 1024;
// The members that decide must lie in the first 64 KiB; a body whose
// `messages` come first (the OpenAI Python SDK writes `model` after them)
// is read whole first.
constexpr std::size_t decide_within = 64 * 1024;
// One read from the client while forwarding: what is read is sent while
// it is still in the cache.
constexpr std::size_t forward_read_bytes = 256 * 1024;

// The first `n` bytes of `pieces`.
void first_bytes(std::vector<net::const_buffer>& pieces, std::size_t n) {
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (n <= pieces[i].size()) {
      pieces[i] = net::const_buffer(pieces[i].data(), n);
      pieces.resize(i + 1);
      return;
    }
    n -= pieces[i].size();
  }
}

// The decision the body's start allows, with the edits for its target; or
// nothing, when the members read so far do not decide (the model not seen
// yet, an error the whole body must confirm, an edit that would not stay
// well-formed).
std::optional<early_forward> decide_on_start(worker& w, std::shared_ptr<const config::config> cfg,
                                             const config::listener& listener,
                                             const client_request& request, std::string_view path,
                                             std::size_t have,
                                             std::vector<routing::splice>& edits) {
  early_forward plan;
  edits.clear();
  if (cfg->routes.empty()) {
    plan.upstream = &cfg->upstreams.at(config::as_configured(*cfg, listener).upstream);
    plan.config = std::move(cfg);
    return plan;
  }
  auto start = body_text(request).substr(0, have);
  auto end = routing::whole_members_end(start);
  if (end == std::string_view::npos) return std::nullopt;
  // The members read, as an object: the policy sees them at the offsets
  // they have in the whole body.
  std::string members(start.substr(0, end));
  members += '}';
  const auto& head = request.head;
  auto client_key = routing::client_key_from(head.value_of(known_field::authorization),
                                             head.value_of(known_field::x_api_key));
  auto decision = routing::apply_policy(*cfg, {path, members, client_key, request.body.size()});
  auto* routed = std::get_if<routing::routed_request>(&decision);
  // (a request that may wait for capacity, or follow its conversation,
  // is sent once it is read whole and admitted)
  if (!routed || fleet_decides(*cfg, *routed->route)) return std::nullopt;
  auto chosen = choose_targets(w, *cfg, *routed, members, request.body.size());
  auto* choice = std::get_if<fleet_choice>(&chosen);
  if (!choice) return std::nullopt;  // (the whole body will say why)
  plan.target = choice->order.front().target;
  plan.upstream = &cfg->upstreams.at(plan.target->upstream);
  // (a translated body is made from the whole body; a target that cannot
  // take the request at all refuses it once it is read)
  if (!translate::sent_as_is(dialect_for_path(path), *plan.upstream)) return std::nullopt;
  plan.route = routed->route;
  plan.model = routed->model;
  plan.output_limit = routed->output_limit;
  plan.stream = routed->stream;
  plan.usage_needed = routing::usage_needed(*routed, path);
  plan.decided_on = end;
  // The edits lie among the members read, and leave an object with at
  // least one member (`model` is renamed, never removed): the members after
  // (",…}") follow it as well-formed JSON. (tests/fuzz/policy_fuzz checks
  // that the body sent this way equals, as JSON, the one the whole body's
  // plan would send.)
  edits = routing::edits_for_target(members, path, *routed, *plan.target, *plan.upstream,
                                    plan.usage_needed);
  plan.config = std::move(cfg);
  return plan;
}

// Sends the body on as it arrives, after the head, all of it but its last
// byte. Returns the client's read error; the connection is let go (and the
// rest read without forwarding) when the upstream fails to take it.
net::awaitable<error_code> forward_while_reading(any_stream& client, client_request& request,
                                                 worker& w, request_context& ctx,
                                                 early_forward& plan,
                                                 const std::vector<routing::splice>& edits,
                                                 std::size_t& have) {
  const auto& settings = *plan.upstream;
  auto& pool = w.upstreams().pool_for(settings);
  auto& body = request.body;
  const std::size_t length = body.size();
  std::string head;
  auto pieces = upstream_request(request, pool, settings, ctx, edits, {}, head);
  const auto total = net::buffer_size(pieces);
  std::size_t sent = 0;
  std::vector<net::const_buffer> part;
  auto& upstream = plan.acquired.conn->stream;
  for (;;) {
    // What has arrived goes; the last byte waits for the whole body's scan.
    auto ready = std::min(total - 1, total - (length - have));
    if (ready > sent) {
      unsent_part(pieces, sent, part);
      first_bytes(part, ready - sent);
      upstream.expires_after(settings.timeouts.first_byte);
      auto [ec, n] = co_await write_all(upstream, part);
      if (ec) {
        plan.acquired.conn.reset();  // the exchange tries again, the usual way
        co_return error_code{};
      }
      sent += n;
    }
    if (have == length) co_return error_code{};
    auto [ec, n] = co_await client.async_read_some(
        net::buffer(body.data() + have, std::min(length - have, forward_read_bytes)), use_tuple);
    have += n;
    if (ec) co_return ec;
  }
}

// Whether this body may go upstream before it is whole: long enough (by
// its declared length, already its buffer's size), an API request that
// will be proxied, and the client not refused whatever it sends.
bool forwardable(const client_request& request, std::string_view path,
                 const config::limit_settings& limits, bool may_forward) {
  const auto target = request.head.target;
  const auto from = limits.forward_early_bytes;
  return may_forward && from > 0 && request.body.size() >= std::max(from, direct_from) &&
         request.head.method == http::verb::post && is_proxied_post(path) && !target.empty() &&
         target.front() == '/';
}

// Decides on the body's start (reading more of it while that does not
// decide, up to decide_within) and forwards the rest as it arrives. Sets
// `early` when the upstream holds all but the last byte, or when the
// connection could not be had (the exchange reports that failure).
net::awaitable<error_code> forward_early(any_stream& client, client_request& request, worker& w,
                                         const config::listener& listener, request_context& ctx,
                                         std::size_t& have, std::unique_ptr<early_forward>& early) {
  auto cfg = w.snapshot();
  auto& body = request.body;
  const auto decide_upto = std::min(body.size(), decide_within);
  std::vector<routing::splice> edits;
  std::optional<early_forward> plan;
  // Try on what the head's read brought, then each time the start has
  // doubled (a body whose first member is long is not scanned again and
  // again).
  for (std::size_t tried_at = 0;;) {
    if (have >= 2 * tried_at || have == body.size()) {
      plan = decide_on_start(w, cfg, listener, request, ctx.path, have, edits);
      tried_at = have;
    }
    if (plan || have >= decide_upto) break;
    auto [ec, n] = co_await client.async_read_some(
        net::buffer(body.data() + have, decide_upto - have), use_tuple);
    have += n;
    if (ec) co_return ec;
  }
  if (!plan || have == body.size())
    co_return error_code{};  // undecided, or nothing left to overlap
  const auto& settings = *plan->upstream;
  if (settings.max_concurrent_streams &&
      w.upstreams().active_streams(settings.name) >= settings.max_concurrent_streams)
    co_return error_code{};
  plan->acquired = co_await w.upstreams().pool_for(settings).acquire();
  if (plan->acquired.conn) {
    ctx.upstream_connected = clock::now();
    if (auto ec = co_await forward_while_reading(client, request, w, ctx, *plan, edits, have))
      co_return ec;
    if (plan->acquired.conn) w.metrics().upstream_rq_forwarded_early.add();
  }
  // (Neither: the upstream failed mid-body; the exchange tries afresh.)
  if (plan->acquired.conn || plan->acquired.failure != upstream::connect_failure::none)
    early = std::make_unique<early_forward>(std::move(*plan));
  co_return error_code{};
}

}  // namespace

void abandon_early_forward(worker& w, std::unique_ptr<early_forward>& early) {
  if (!early) return;
  if (early->acquired.conn) w.metrics().upstream_rq_early_abandoned.add();
  early.reset();
}

bool early_forward::agrees_with(const routing::routed_request& whole, std::string_view path) const {
  if (whole.route != route || whole.model != model || whole.output_limit != output_limit ||
      whole.stream != stream || routing::usage_needed(whole, path) != usage_needed)
    return false;
  for (const auto& m : whole.scan.members)
    if (m.member_begin > decided_on && routing::policy_reads(m.key)) return false;
  return true;
}

net::awaitable<error_code> read_body(any_stream& client, beast::flat_buffer& buffer,
                                     client_request& request, worker& w,
                                     const config::listener& listener, request_context& ctx,
                                     bool may_forward, std::unique_ptr<early_forward>& early) {
  const auto max_body = w.config().limits.max_body_bytes;
  if (request.head.chunked)
    co_return co_await read_chunked_body(client, buffer, request.body, max_body);
  // A body of known length is read straight into its buffer, after what
  // the head's read brought: no copy through the connection's buffer (a
  // 200 KB prompt read through it in 4 KiB reads was about 50 copies).
  const auto length = request.head.content_length.value_or(0);
  if (length > max_body) co_return http::error::body_limit;
  auto& body = request.body;
  body = w.bodies().take(length);
  std::size_t have = std::min<std::size_t>(buffer.size(), length);
  net::buffer_copy(net::buffer(body.data(), have), buffer.data());
  buffer.consume(have);

  if (forwardable(request, ctx.path, w.config().limits, may_forward))
    if (auto ec = co_await forward_early(client, request, w, listener, ctx, have, early))
      co_return ec;
  if (have == length) co_return error_code{};
  auto [ec, n] =
      co_await net::async_read(client, net::buffer(body.data() + have, length - have), use_tuple);
  co_return ec;
}

}  // namespace tokengate
