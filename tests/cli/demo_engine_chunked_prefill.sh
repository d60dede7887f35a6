#!/usr/bin/env bash
# Black-box: the demo engine's chunked prefill. A stream is decoding when
# a 6,000-token prompt arrives. Without chunking its prefill (3 s at
# 500 ms per 1,000 tokens) stops the stream for all that time; with 256
# tokens a step the stream's longest gap stays near one step (about
# 150 ms). Either engine publishes its cache size as vLLM does.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"

longest_gap_ms() {  # ENGINE_PORT: the decoding stream's longest gap while the long prompt prefills
  local port=$1 long
  long=$(printf 'The long prompt arrives. %.0s' $(seq 960))  # about 24 KB: 6,000 tokens
  (sleep 0.4 && curl -sf -m 30 -o /dev/null "http://127.0.0.1:$port/v1/chat/completions" \
    -H 'content-type: application/json' \
    -d "{\"model\":\"demo\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"$long\"}]}") &
  curl -sN -m 30 "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' \
    -d '{"model":"demo","stream":true,"max_tokens":60,"messages":[{"role":"user","content":"hi"}]}' |
    while IFS= read -r line; do [[ $line == data:* ]] && date +%s%3N; done |
    awk 'NR > 1 && $1 - last > gap { gap = $1 - last } { last = $1 } END { print gap + 0 }'
  wait
}

start_demo_engine --slots 4 --decode-tps 50 --prefill-ms-per-1k 500
whole=$(longest_gap_ms "$engine")
page=$(curl -sf "http://127.0.0.1:$engine/metrics")
grep -q '^vllm:cache_config_info{block_size="16",num_gpu_blocks="4096"} 1' <<< "$page" ||
  fail "the engine does not publish its cache size (65,536 tokens in 16-token blocks)"
start_demo_engine --slots 4 --decode-tps 50 --prefill-ms-per-1k 500 --chunked-prefill-tokens 256
chunked=$(longest_gap_ms "$engine")
((whole > 2500)) || fail "an unchunked 3 s prefill stalled the stream only ${whole} ms"
((chunked < 1000)) || fail "with chunked prefill the stream still stalled ${chunked} ms"
echo "cli_demo_engine_chunked_prefill: longest gap ${whole} ms whole, ${chunked} ms chunked"
