#pragma once
// The demo engine's realistic mode (demo_engine.slots > 0): one engine's
// time, shared by its requests the way a vLLM or llama.cpp server shares
// it. At most `slots` sequences run, and only while their prompt and
// output fit in `kv_tokens`; the rest wait in arrival order. One loop does
// the work: a prefill (time proportional to the prompt tokens not found in
// the prefix cache) holds every running sequence's decoding until it is
// done; otherwise a decode step gives each running sequence one token and
// takes a little longer the more sequences it carries (continuous
// batching). With chunked prefill, each step instead carries the decodes
// and up to `chunked_prefill_tokens` of the prompts waiting for prefill,
// and takes the time of both: decoding slows rather than stops. Prompts are cached in blocks, keyed
// by the hash of everything up to each block's end, so a prompt that starts like an earlier one (a
// conversation resending its history) prefills only the rest, and reports the rest as
// usage.prompt_tokens_details.cached_tokens.
//
// Everything runs on the engine's one thread: no locks.
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "io/net.hpp"

namespace tokengate::engine {

class batch_scheduler {
 public:
  struct sequence {
    sequence(const net::any_io_executor& ex, batch_scheduler* from) : wake(ex), owner(from) {}
    std::vector<std::uint64_t> blocks;  // hash of the prompt up to each block's end
    long long prompt_tokens = 0;
    long long output_tokens = 0;
    long long cached_tokens = 0;  // found in the prefix cache at prefill
    long long produced = 0;       // tokens the engine has generated so far
    long long to_prefill = -1;    // chunked: prompt tokens left to prefill (-1: not begun)
    bool admitted = false, prefilled = false, released = false;
    net::steady_timer wake;  // cancelled when `produced` grows
    batch_scheduler* owner;
  };

  // Prompt text per cached block: about `block_tokens` tokens at 4 bytes each.
  static constexpr std::size_t block_tokens = 16;
  static std::vector<std::uint64_t> prompt_blocks(std::string_view prompt_text);

  batch_scheduler(net::any_io_executor executor, const config::demo_engine_settings& settings);
  void start();

  std::shared_ptr<sequence> submit(std::vector<std::uint64_t> blocks, long long prompt_tokens,
                                   long long output_tokens);
  // Until token `index` (0-based) of `s` exists; throws when the waiting
  // coroutine is cancelled (its client left).
  net::awaitable<void> wait_for_token(sequence& s, long long index);
  // Finished or abandoned: its slot and its KV go back.
  void release(sequence& s);

  // vLLM's names: vllm:num_requests_running, vllm:num_requests_waiting,
  // vllm:kv_cache_usage_perc, vllm:prefix_cache_queries_total,
  // vllm:prefix_cache_hits_total (in tokens).
  std::string prometheus() const;

 private:
  net::awaitable<void> run();
  void admit();
  sequence* next_to_prefill();
  net::awaitable<void> prefill(std::shared_ptr<sequence> s);
  net::awaitable<void> decode_step();
  net::awaitable<void> mixed_step();  // chunked prefill
  long long begin_prefill(sequence& s);
  void end_prefill(sequence& s);
  std::vector<std::shared_ptr<sequence>> decoding() const;
  net::awaitable<void> idle();
  long long cached_prefix(const sequence& s);
  void remember(const sequence& s);
  net::awaitable<void> pause(std::chrono::microseconds d);
  void produced(sequence& s, long long tokens);

  net::any_io_executor executor_;
  int slots_;
  long long kv_tokens_;
  double prefill_base_ms_, prefill_ms_per_1k_, step_ms_, step_ms_per_sequence_;
  long long chunk_tokens_;
  std::deque<std::shared_ptr<sequence>> waiting_;
  std::vector<std::shared_ptr<sequence>> running_;
  long long kv_used_ = 0;
  net::steady_timer idle_;  // the loop's wait for work
  // The prefix cache: block hashes, least recently used first.
  std::list<std::uint64_t> lru_;
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> cached_;
  std::size_t cache_blocks_;
  std::uint64_t prefix_queries_ = 0, prefix_hits_ = 0;  // tokens
};

}  // namespace tokengate::engine
