#pragma once
// GET /stats/stream on the admin listener: server-sent events, one /stats
// snapshot a second, for the status page. Nothing runs for it while nobody
// watches: each feed is one coroutine with its own timer, which ends when
// its client closes (or sends anything) or a write stalls. The listener
// bounds how many run at once.
#include <boost/beast/core/tcp_stream.hpp>
#include <functional>
#include <string>

#include "io/net.hpp"

namespace tokengate {

// The head, then a snapshot at once and one a second after it; returns
// when the feed is over (the connection is then closed).
net::awaitable<void> run_stats_feed(beast::tcp_stream& stream,
                                    const std::function<std::string()>& snapshot);

}  // namespace tokengate
