#pragma once
// The proxy exchange for one request: try the planned upstreams in order
// (fallback only while nothing has reached the client), relay the response
// chunk by chunk as it arrives, observe the stream (TTFT, tokens, usage,
// the output limit), and watch the client so that its disconnect closes the
// upstream at once.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "routing/json_scan.hpp"
#include "net.hpp"
#include "server/client_request.hpp"
#include "upstream/pool.hpp"

namespace tokengate {

class any_stream;
class client_watcher;
class worker;
struct request_context;

struct exchange_plan {
  std::shared_ptr<const config::config> config;      // the snapshot this request runs on
  std::vector<const config::upstream*> upstreams;    // attempt order; more than one = fallback
  // The changes to the request body for each attempt, sorted
  // (routing::edits_for_target); none means the body goes as the client sent
  // it. Worked out before the exchange, so that nothing of the policy's
  // reading of the body stays alive for the length of a stream.
  std::vector<std::vector<routing::splice>> edits;
  std::optional<long long> output_limit;             // enforced on the stream
  std::vector<std::pair<std::string, std::string>> response_headers;  // e.g. the clamp notice
  std::chrono::milliseconds retry_backoff{0};
  // The first attempt's connection when the body was forwarded while it
  // arrived (server/early_forward.hpp): it holds all of the request but
  // the body's last byte. Or the failure to connect met then.
  std::optional<upstream::acquire_result> first_connection;
};

// Returns whether the client connection may carry another request.
// `watcher` reads from the client meanwhile (server/client_watcher.hpp).
net::awaitable<bool> proxy_exchange(any_stream& client, client_watcher& watcher, client_request& request,
                                    worker& w, exchange_plan& plan, request_context& ctx);

// Writes a complete error response with an OpenAI-style JSON body.
net::awaitable<void> send_json_error(any_stream& client, unsigned status, std::string_view message,
                                     std::string_view type, std::string_view code,
                                     bool keep_alive, request_context& ctx);

// Writes a complete 200 response with a JSON body.
net::awaitable<void> send_json(any_stream& client, std::string body, bool keep_alive, request_context& ctx);

}  // namespace tokengate
