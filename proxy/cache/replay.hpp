#pragma once
// A hit, as its client gets it: the proxy's own head (the stored answer's
// status and content type, `x-tokengate-cache: hit`, its `age`), then the
// stored body re-framed by the proxy: an event stream event by event (the
// stored bytes are parsed, never copied through, so a stored body cannot
// add a header or end the response early), a whole answer as one body.
// The answer's ids are fresh: two hits are two answers to their clients;
// its usage marks the prompt as read from the cache (cache/cached_share.hpp).
// Paced (cache: {pace: original}), a stream comes in pieces at the times
// its bytes first arrived; otherwise it is one write.
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "cache/store.hpp"

namespace tokengate::cache {

struct replay_options {
  unsigned http_version = 11;  // 11 or 10: an HTTP/1.0 stream ends with the connection
  bool keep_alive = true;
  // Chat completions: the usage-only chunk was asked for on the client's
  // behalf when the answer was kept; this client did not ask for it.
  bool hide_usage_chunk = false;
  std::string_view request_id;
  std::chrono::seconds age{0};
  bool paced = false;  // a stream's events at their stored arrival times
};

// Bytes to write `at` after the first piece was written.
struct replay_piece {
  std::string bytes;
  std::chrono::milliseconds at{0};
};

// The response, head and body, in pieces (one unless paced and the entry
// is a stream with arrival marks); the head is in the first.
std::vector<replay_piece> replay_pieces(const entry& e, const replay_options& o);

// The response's bytes, head and body, ready for one write.
std::string replayed(const entry& e, const replay_options& o);

}  // namespace tokengate::cache
