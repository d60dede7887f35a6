#pragma once
// An engine's load read off its Prometheus metrics page, whichever engine
// it is: vLLM (vllm:num_requests_running / _waiting,
// vllm:kv_cache_usage_perc), SGLang (sglang:num_running_reqs,
// sglang:num_queue_reqs, sglang:token_usage), TGI (tgi_batch_current_size,
// tgi_queue_size) and llama.cpp's server (llamacpp:requests_processing,
// llamacpp:requests_deferred, llamacpp:kv_cache_usage_ratio). A metric
// with several label sets (one per model) is summed. The size of its KV
// cache, where it publishes one: vLLM's vllm:cache_config_info labels
// (num_gpu_blocks × block_size), SGLang's sglang:max_total_num_tokens.
#include <optional>
#include <string_view>

namespace tokengate::fleet {

struct engine_gauges {
  double running = 0;
  double waiting = 0;
  std::optional<double> kv_usage;      // 0..1
  std::optional<long long> kv_tokens;  // the cache's size in tokens
};

// nullopt when the page names none of the running-request metrics.
std::optional<engine_gauges> read_engine_gauges(std::string_view prometheus_text);

}  // namespace tokengate::fleet
