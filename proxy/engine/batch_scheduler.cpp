#include "engine/batch_scheduler.hpp"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/system/system_error.hpp>
#include <functional>

namespace tokengate::engine {

using steady = std::chrono::steady_clock;

std::vector<std::uint64_t> batch_scheduler::prompt_blocks(std::string_view prompt_text) {
  constexpr std::size_t block_bytes = block_tokens * 4;
  std::vector<std::uint64_t> blocks;
  std::uint64_t chain = 1469598103934665603ULL;
  for (std::size_t at = 0; at + block_bytes <= prompt_text.size(); at += block_bytes) {
    auto h = std::hash<std::string_view>{}(prompt_text.substr(at, block_bytes));
    chain = (chain ^ h) * 1099511628211ULL;  // the whole prefix up to here, not the block alone
    blocks.push_back(chain);
  }
  return blocks;
}

batch_scheduler::batch_scheduler(net::any_io_executor executor,
                                 const config::demo_engine_settings& settings)
    : executor_(executor),
      slots_(settings.slots),
      kv_tokens_(settings.kv_tokens),
      prefill_base_ms_(std::chrono::duration<double, std::milli>(settings.prefill_base).count()),
      prefill_ms_per_1k_(settings.prefill_ms_per_1k_tokens),
      step_ms_(1000.0 / settings.decode_tokens_per_second),
      step_ms_per_sequence_(settings.step_ms_per_sequence),
      chunk_tokens_(settings.chunked_prefill_tokens),
      idle_(executor),
      cache_blocks_(static_cast<std::size_t>(settings.kv_tokens) / block_tokens) {}

void batch_scheduler::start() { net::co_spawn(executor_, run(), net::detached); }

std::shared_ptr<batch_scheduler::sequence> batch_scheduler::submit(
    std::vector<std::uint64_t> blocks, long long prompt_tokens, long long output_tokens) {
  auto s = std::make_shared<sequence>(executor_, this);
  s->blocks = std::move(blocks);
  s->prompt_tokens = prompt_tokens;
  s->output_tokens = output_tokens;
  waiting_.push_back(s);
  admit();  // (a free slot takes it at once: the gauges never show a queue that is not there)
  idle_.cancel();
  return s;
}

net::awaitable<void> batch_scheduler::wait_for_token(sequence& s, long long index) {
  while (s.produced <= index && !s.released) {
    s.wake.expires_at(steady::time_point::max());
    co_await s.wake.async_wait(use_tuple);
    auto state = co_await net::this_coro::cancellation_state;
    if (state.cancelled() != net::cancellation_type::none)
      throw boost::system::system_error(net::error::operation_aborted);
  }
}

void batch_scheduler::release(sequence& s) {
  if (s.released) return;
  s.released = true;
  if (s.admitted) kv_used_ -= s.prompt_tokens + s.output_tokens;
  std::erase_if(running_, [&](const auto& r) { return r.get() == &s; });
  std::erase_if(waiting_, [&](const auto& w) { return w.get() == &s; });
  admit();
  s.wake.cancel();
  idle_.cancel();
}

// First come, first served: a sequence that does not fit holds the ones
// behind it (a long prompt is not overtaken forever). One alone is always
// admitted, whatever its size.
void batch_scheduler::admit() {
  while (!waiting_.empty() && static_cast<int>(running_.size()) < slots_) {
    auto& next = *waiting_.front();
    const long long need = next.prompt_tokens + next.output_tokens;
    if (!running_.empty() && kv_used_ + need > kv_tokens_) break;
    next.admitted = true;
    kv_used_ += need;
    running_.push_back(waiting_.front());
    waiting_.pop_front();
  }
}

batch_scheduler::sequence* batch_scheduler::next_to_prefill() {
  for (auto& s : running_)
    if (!s->prefilled) return s.get();
  return nullptr;
}

long long batch_scheduler::cached_prefix(const sequence& s) {
  long long blocks = 0;
  for (auto block : s.blocks) {
    auto found = cached_.find(block);
    if (found == cached_.end()) break;
    lru_.splice(lru_.end(), lru_, found->second);
    ++blocks;
  }
  // (the last prompt token is always computed: it yields the first output)
  return std::min<long long>(blocks * static_cast<long long>(block_tokens), s.prompt_tokens - 1);
}

void batch_scheduler::remember(const sequence& s) {
  for (auto block : s.blocks) {
    if (cached_.count(block)) continue;
    if (cached_.size() >= cache_blocks_ && !lru_.empty()) {
      cached_.erase(lru_.front());
      lru_.pop_front();
    }
    cached_[block] = lru_.insert(lru_.end(), block);
  }
}

net::awaitable<void> batch_scheduler::pause(std::chrono::microseconds d) {
  net::steady_timer timer(executor_, d);
  co_await timer.async_wait(use_tuple);
}

void batch_scheduler::produced(sequence& s, long long tokens) {
  s.produced = std::min(s.output_tokens, s.produced + tokens);
  s.wake.cancel();
}

// A prefill begins: what the prefix cache holds is counted, and the rest
// (returned) is to compute.
long long batch_scheduler::begin_prefill(sequence& s) {
  s.cached_tokens = std::max(0LL, cached_prefix(s));
  prefix_queries_ += static_cast<std::uint64_t>(s.prompt_tokens);
  prefix_hits_ += static_cast<std::uint64_t>(s.cached_tokens);
  return s.prompt_tokens - s.cached_tokens;
}

void batch_scheduler::end_prefill(sequence& s) {
  s.prefilled = true;
  remember(s);
  produced(s, 1);  // the first token comes out of the prefill
}

// The prefill of one sequence: the running ones' decoding waits for it.
net::awaitable<void> batch_scheduler::prefill(std::shared_ptr<sequence> s) {
  const auto uncached = static_cast<double>(begin_prefill(*s));
  const double ms = prefill_base_ms_ + prefill_ms_per_1k_ * uncached / 1000.0;
  co_await pause(std::chrono::microseconds(static_cast<std::int64_t>(ms * 1000)));
  end_prefill(*s);
}

std::vector<std::shared_ptr<batch_scheduler::sequence>> batch_scheduler::decoding() const {
  std::vector<std::shared_ptr<sequence>> batch;
  for (const auto& s : running_)
    if (s->prefilled && s->produced < s->output_tokens) batch.push_back(s);
  return batch;
}

net::awaitable<void> batch_scheduler::idle() {
  idle_.expires_at(steady::time_point::max());
  co_await idle_.async_wait(use_tuple);
}

// One token for every running sequence that has had its prefill.
net::awaitable<void> batch_scheduler::decode_step() {
  auto batch = decoding();
  if (batch.empty()) co_return co_await idle();
  const double ms = step_ms_ + step_ms_per_sequence_ * static_cast<double>(batch.size() - 1);
  co_await pause(std::chrono::microseconds(static_cast<std::int64_t>(ms * 1000)));
  for (auto& s : batch)
    if (!s->released) produced(*s, 1);
}

// Chunked prefill: one step decodes every running sequence that has had
// its prefill and prefills up to chunk_tokens_ prompt tokens of the
// others, in arrival order; it takes the time of both.
net::awaitable<void> batch_scheduler::mixed_step() {
  auto batch = decoding();
  std::vector<std::shared_ptr<sequence>> finishing;
  double prefill_ms = 0;
  for (long long budget = chunk_tokens_; const auto& s : running_) {
    if (s->prefilled || budget <= 0) continue;
    if (s->to_prefill < 0) {
      s->to_prefill = begin_prefill(*s);
      prefill_ms += prefill_base_ms_;
    }
    const long long chunk = std::min(budget, s->to_prefill);
    s->to_prefill -= chunk;
    budget -= chunk;
    prefill_ms += prefill_ms_per_1k_ * static_cast<double>(chunk) / 1000.0;
    if (s->to_prefill == 0) finishing.push_back(s);
  }
  if (batch.empty() && prefill_ms == 0) co_return co_await idle();
  const double decode_ms =
      batch.empty() ? 0 : step_ms_ + step_ms_per_sequence_ * static_cast<double>(batch.size() - 1);
  co_await pause(
      std::chrono::microseconds(static_cast<std::int64_t>((decode_ms + prefill_ms) * 1000)));
  for (auto& s : batch)
    if (!s->released) produced(*s, 1);
  for (auto& s : finishing)
    if (!s->released) end_prefill(*s);
}

net::awaitable<void> batch_scheduler::run() {
  for (;;) {
    admit();
    if (chunk_tokens_ > 0) {
      co_await mixed_step();
    } else if (auto* s = next_to_prefill()) {
      auto held = std::find_if(running_.begin(), running_.end(),
                               [&](const auto& r) { return r.get() == s; });
      co_await prefill(*held);
    } else {
      co_await decode_step();
    }
  }
}

std::string batch_scheduler::prometheus() const {
  const auto line = [](const char* name, const char* type, double value) {
    return std::string("# TYPE ") + name + " " + type + "\n" + name + "{model_name=\"demo\"} " +
           std::to_string(value) + "\n";
  };
  // (vLLM's cache size: its labels, and 1)
  const auto cache_config =
      "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"" +
      std::to_string(block_tokens) + "\",num_gpu_blocks=\"" + std::to_string(cache_blocks_) +
      "\"} 1.0\n";
  return cache_config +
         line("vllm:num_requests_running", "gauge", static_cast<double>(running_.size())) +
         line("vllm:num_requests_waiting", "gauge", static_cast<double>(waiting_.size())) +
         line("vllm:kv_cache_usage_perc", "gauge",
              static_cast<double>(kv_used_) / static_cast<double>(std::max(1LL, kv_tokens_))) +
         line("vllm:prefix_cache_queries_total", "counter", static_cast<double>(prefix_queries_)) +
         line("vllm:prefix_cache_hits_total", "counter", static_cast<double>(prefix_hits_));
}

}  // namespace tokengate::engine
