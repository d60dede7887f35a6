#pragma once
// A config without routes: no policy to apply. The request goes to its
// listener's upstream with its body as sent, once that body is known to be
// a JSON object (bad syntax, invalid UTF-8, lone surrogates and runaway
// nesting stop here, not upstream).
#include <memory>

#include "config/config.hpp"
#include "http/client_request.hpp"
#include "http/request_context.hpp"
#include "io/net.hpp"

namespace tokengate {

class any_stream;
class client_watcher;
class worker;
struct early_forward;

// Returns whether the connection may carry another request.
net::awaitable<bool> pass_through(any_stream& stream, client_watcher& watcher,
                                  client_request& request, worker& w,
                                  std::shared_ptr<const config::config> cfg,
                                  const config::listener& listener, request_context& ctx,
                                  bool keep_alive, std::unique_ptr<early_forward>& early);

}  // namespace tokengate
