#pragma once
// A translated answer that is not an event stream (a completion asked
// for without streaming, or an error): read whole, within a bound, then
// translated (its status too: Anthropic's 529 is OpenAI's 503) and sent
// with its length.
#include "io/net.hpp"
#include "stream/answer_translator.hpp"
#include "stream/relay.hpp"
#include "upstream/exchange.hpp"

namespace tokengate::stream {

// The most of an upstream's whole answer read for translation.
inline constexpr std::size_t max_translated_body = 16 * 1024 * 1024;

net::awaitable<bool> relay_whole_translated(upstream::exchange_state& s, upstream::answer& a,
                                            const upstream::exchange_plan& plan,
                                            const relay_env& env, bool client_keep_alive,
                                            answer_translator& translator);

}  // namespace tokengate::stream
