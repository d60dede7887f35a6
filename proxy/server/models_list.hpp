#pragma once
// GET /v1/models with routes: the models the client's key may use, from
// the policy; no upstream is asked.
#include <string_view>

#include "config/config.hpp"
#include "http/request_context.hpp"
#include "io/net.hpp"

namespace tokengate {

class any_stream;

// Returns whether the connection may carry another request.
net::awaitable<bool> answer_models_list(any_stream& stream, const config::config& cfg,
                                        std::string_view client_key, bool keep_alive,
                                        request_context& ctx);

}  // namespace tokengate
