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
# the proxy's CPU per request (the scheduler's count). With ROUNDS, asked
# and kept-as-a-miss then alternate ROUNDS more times in the same process,
# each pair with its ratio, and at the end the median ratio and the ratio
# of the rounds' sums: the machine's drift over a run falls on both alike.
# On demand, not a test.
# Usage: tests/bench/cache_hits.sh TOKENGATE_BIN [REQUESTS] [CONCURRENCY] [ROUNDS]
set -euo pipefail
bin=$1 requests=${2:-2000} concurrency=${3:-1} rounds=${4:-0}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port) port=$(free_port) admin=$(free_port)
taskset -c 1 "$bin" demo-engine --port "$engine" > "$work/engine.log" 2>&1 &
pids+=($!)
cat > "$work/cfg.yaml" <<YAML
log_level: warn
workers: 1
listeners: [{name: main, address: 127.0.0.1, port: $port}]
upstreams: {demo: {base_url: "http://127.0.0.1:$engine/v1"}}
routes:
  - {name: cached, models: [cached], targets: [{upstream: demo}], cache: {ttl: 10m, mode: always}}
  - {name: asked, models: [asked], targets: [{upstream: demo}]}
admin: {address: 127.0.0.1, port: $admin}
YAML
taskset -c 0 "$bin" serve -c "$work/cfg.yaml" > "$work/proxy.log" 2>&1 &
proxy=$!
pids+=("$proxy")
wait_listening "$work/proxy.log" 10

# The proxy's CPU time in ns, its threads' together: the scheduler's own
# count (schedstat), finer than /proc's 10 ms ticks.
cpu_ns() { cat /proc/"$proxy"/task/*/schedstat | awk '{ns += $1} END {printf "%.0f", ns}'; }
run() {  # MODEL LABEL [BENCH-ARGS...]: the load, then its line
  local model=$1 label=$2 before after
  shift 2
  before=$(cpu_ns)
  "$bin" bench --url "http://127.0.0.1:$port/v1" --model "$model" --requests "$requests" \
    --concurrency "$concurrency" --prompt-tokens 200 --max-tokens 100 --json "$@" \
    --extra-body '{"demo":{"ttft_ms":20,"interval_ms":1,"tokens":64}}' > "$work/$label.json"
  after=$(cpu_ns)
  python3 - "$work/$label.json" "$label" "$((after - before))" "$concurrency" << 'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
each = sorted(r["ttft_ms_each"][int(sys.argv[4]):])  # (the first wave asks upstream)
q = lambda p: each[int(p * (len(each) - 1))]
cpu_us = int(sys.argv[3]) / 1e3 / r["requests"]
open(sys.argv[1] + ".cpu", "w").write(f"{cpu_us}")
print(f"  {sys.argv[2]:6} {r['ok']}/{r['requests']} ok, TTFT p50 {q(0.5):.3f} ms, p99 {q(0.99):.3f} ms, "
      f"proxy CPU {cpu_us:.0f} us a request")
PY
}
echo "$requests requests, $concurrency at a time:"
run asked asked
run cached hit
run cached missed --header 'Cache-Control: no-cache'
ratios=() asked_us=0 missed_us=0
for ((round = 1; round <= rounds; round++)); do
  run asked asked
  run cached missed --header 'Cache-Control: no-cache'
  asked_us+="+$(cat "$work/asked.json.cpu")" missed_us+="+$(cat "$work/missed.json.cpu")"
  ratios+=("$(python3 -c "print(round($(cat "$work/missed.json.cpu") / $(cat "$work/asked.json.cpu"), 3))")")
  echo "  round $round: kept as a miss / asked ${ratios[-1]}"
done
if ((rounds > 0)); then
  printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR] = $1} END {print "  median of the rounds: " (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'
  python3 -c "print(f'  all rounds together: kept as a miss / asked {($missed_us) / ($asked_us):.3f}')"
fi
curl -s "http://127.0.0.1:$admin/metrics" | grep '^tokengate_cache_requests_total{route="cached"' | sed 's/^/  /'
