#!/usr/bin/env bash
# The response cache's hits against the same requests asked upstream, in
# one run: tokengate (core 0) in front of the demo engine (core 1, 20 ms to
# the first token, 64 tokens a millisecond apart), one route with
# `cache: {ttl: 10m, mode: always}` and one without. `tokengate bench`
# (core 1) asks one request REQUESTS times at CONCURRENCY; on the cached
# route all but the first wave are hits. Then the cached route again with
# `Cache-Control: no-cache`: every request asked upstream and its answer
# copied and kept, as a miss is (its key made, its body copied, the entry
# replaced). Prints each form's TTFT p50/p99 (the first wave left out) and
# the proxy's CPU per request (the scheduler's count). Phases one after
# another drift with the machine by more than a miss costs: for that,
# cache_miss_cost.sh runs both at once. On demand, not a test.
# Usage: tests/bench/cache_hits.sh TOKENGATE_BIN [REQUESTS] [CONCURRENCY]
set -euo pipefail
bin=$1 requests=${2:-2000} concurrency=${3:-1}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port) port=$(free_port) admin=$(free_port)
taskset -c 1 "$bin" demo-engine --port "$engine" > "$work/engine.log" 2>&1 &
pids+=($!)
cache_config "$work/cfg.yaml" "$port" "$engine" "$admin"
start_tokengate "$bin" "$work/cfg.yaml" "$work/proxy.log"
pids+=("$proxy")

run() {  # MODEL LABEL [BENCH-ARGS...]: the load, then its line
  local model=$1 label=$2 before after
  shift 2
  before=$(cpu_ns "$proxy")
  cache_load "$port" "$model" "$requests" "$concurrency" "$work/$label.json" "$@"
  after=$(cpu_ns "$proxy")
  python3 - "$work/$label.json" "$label" "$((after - before))" "$concurrency" << 'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
each = sorted(r["ttft_ms_each"][int(sys.argv[4]):])  # (the first wave asks upstream)
q = lambda p: each[int(p * (len(each) - 1))]
cpu_us = int(sys.argv[3]) / 1e3 / r["requests"]
print(f"  {sys.argv[2]:6} {r['ok']}/{r['requests']} ok, TTFT p50 {q(0.5):.3f} ms, p99 {q(0.99):.3f} ms, "
      f"proxy CPU {cpu_us:.0f} us a request")
PY
}
echo "$requests requests, $concurrency at a time:"
run asked asked
run cached hit
run cached missed --header 'Cache-Control: no-cache'
curl -s "http://127.0.0.1:$admin/metrics" | grep '^tokengate_cache_requests_total{route="cached"' | sed 's/^/  /'
