#!/usr/bin/env bash
# What tokengate adds to each event, second by second, under many streams:
# its own tokengate_relay_delay_seconds (an upstream read's newest bytes,
# from their arrival in the kernel to their write to the client), read from
# /metrics once a second while `tokengate bench` holds STREAMS streams of
# TOKENS tokens, INTERVAL_MS apart, open at once. Shows the ramp-up (every
# connection opened at once), the steady state and the end apart, where
# the benchmark's percentiles mix them. Quantiles are bucket bounds
# ("at most"). On demand, not a test.
# Usage: tests/bench/relay_delay.sh TOKENGATE_BIN [STREAMS] [INTERVAL_MS] [TOKENS]
#   scenario 3's load:   relay_delay.sh build/tokengate 9000 500 12
#   2,000 busier ones:   relay_delay.sh build/tokengate 2000 100 60
#   opened over 5 s:     RAMP_UP=5 relay_delay.sh build/tokengate 9000 500 40
# The proxy runs on core 0; the demo engine and the load on core 1.
set -euo pipefail
bin=$1 streams=${2:-9000} interval=${3:-500} tokens=${4:-12}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port) port=$(free_port) admin=$(free_port)
start_engine "$bin" "$engine"
tokengate_config "$work/cfg.yaml" "$port" "$engine"
echo "admin: {address: 127.0.0.1, port: $admin}" >> "$work/cfg.yaml"
start_tokengate "$bin" "$work/cfg.yaml" "$work/proxy.log"
pids+=("$proxy")
extra="{\"demo\":{\"ttft_ms\":0,\"interval_ms\":$interval,\"tokens\":$tokens}}"
taskset -c 1 "$bin" bench --url "http://127.0.0.1:$port/v1" --model bench --requests "$streams" \
  --concurrency "$streams" --max-tokens "$tokens" --prompt-tokens 20 --json ${RAMP_UP:+--ramp-up "$RAMP_UP"} \
  --extra-body "$extra" > "$work/r.json" &
load=$!
buckets() {
  curl -s "http://127.0.0.1:$admin/metrics" | { grep '^tokengate_relay_delay_seconds_bucket' || true; } |
    sed -E 's/.*le="([^"]+)"\} ([0-9]+)/\1 \2/'
}
echo "$streams streams, a token every $interval ms; tokengate's relay delay per second (at most, ms)"
before=$(buckets)
second=0
while kill -0 "$load" 2> /dev/null; do
  sleep 1
  second=$((second + 1))
  after=$(buckets)
  python3 - "$before" "$after" "$second" <<'PY'
import sys
def parse(text):
    counts = {}
    for line in text.strip().splitlines():
        le, n = line.split()
        counts[le] = counts.get(le, 0) + int(n)
    return counts
before, after = parse(sys.argv[1]), parse(sys.argv[2])
grown = {le: n - before.get(le, 0) for le, n in after.items()}
total = grown.get("+Inf", 0)
if total:
    order = sorted(grown, key=lambda le: float("inf") if le == "+Inf" else float(le))
    def at_most(q):
        le = next(le for le in order if grown[le] >= q * total)
        return "inf" if le == "+Inf" else f"{float(le) * 1000:g}"
    print(f"second {sys.argv[3]:>3}: {total:6d} reads   p50 {at_most(0.5):>6}   p90 {at_most(0.9):>6}   p99 {at_most(0.99):>6}")
PY
  before=$after
done
wait "$load"
