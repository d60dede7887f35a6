#include "server/models_list.hpp"

#include "http/json_response.hpp"
#include "io/any_stream.hpp"
#include "routing/policy.hpp"

namespace tokengate {

net::awaitable<bool> answer_models_list(any_stream& stream, const config::config& cfg,
                                        std::string_view client_key, bool keep_alive,
                                        request_context& ctx) {
  auto auth = routing::authenticate(cfg, client_key);
  if (auto* e = std::get_if<request_error>(&auth))
    co_await send_error(stream, std::move(*e), keep_alive, ctx);
  else
    co_await send_json(stream,
                       routing::models_list_json(cfg, std::get<const config::client_key*>(auth)),
                       keep_alive, ctx);
  co_return keep_alive;
}

}  // namespace tokengate
