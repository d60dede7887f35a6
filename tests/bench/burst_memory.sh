#!/usr/bin/env bash
# tokengate's memory through a burst of slow streams opened at once: the
# peak resident memory per open stream, and what it still holds 3.5 s after
# the burst ended (the heap's memory given back, or not), with its CPU per
# event and the load's transit p99. On demand, not a test. PRELOAD as in
# cpu_split.sh.
# Usage: tests/bench/burst_memory.sh TOKENGATE_BIN [STREAMS] [INTERVAL_MS] [TOKENS]
#   scenario 3 in small: burst_memory.sh build/tokengate 9000 50 100
# AFTER_S: seconds from the burst's end to the reading of what is held (3.5).
# DEMO adds demo knobs, e.g. a hosted provider's response head: DEMO='"provider_head":true'.
# The proxy runs on core 0; the demo engine and the load on core 1.
set -euo pipefail
bin=$1 streams=${2:-9000} interval=${3:-50} tokens=${4:-100}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port) port=$(free_port)
start_engine "$bin" "$engine"
start_proxy tokengate "$bin" "$port" "$engine"
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$proxy/status"; }
idle=$(rss_kb)
read -r user0 sys0 < <(awk '{print $14, $15}' "/proc/$proxy/stat")
taskset -c 1 "$bin" bench --url "$scheme://$host:$port/v1" --model bench --requests "$streams" \
  --concurrency "$streams" --max-tokens "$tokens" --prompt-tokens 20 --json \
  --extra-body "{\"demo\":{\"ttft_ms\":0,\"interval_ms\":$interval,\"tokens\":$tokens,\"stamp\":true${DEMO:+,$DEMO}}}" > "$work/r.json" &
load=$!
peak=0
while kill -0 "$load" 2> /dev/null; do
  now=$(rss_kb)
  ((now > peak)) && peak=$now
  sleep 0.05
done
wait "$load"
read -r user1 sys1 < <(awk '{print $14, $15}' "/proc/$proxy/stat")
sleep "${AFTER_S:-3.5}"  # the after-burst release runs once a second, after two quiet checks
after=$(rss_kb)
python3 - "$work/r.json" "$streams" "$(getconf CLK_TCK)" "$idle" "$peak" "$after" "$user0" "$sys0" "$user1" "$sys1" "${AFTER_S:-3.5}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["ok"] == r["requests"], f"errors: {r['errors']}"
streams, ticks, idle, peak, after, user0, sys0, user1, sys1 = map(int, sys.argv[2:11])
events = r["output_tokens"]
cpu = lambda t: t / ticks / events * 1e6  # seconds per million events
p99 = (r.get("transit_ms") or {}).get("p99", float("nan"))
print(f"{streams} streams: {(peak - idle) * 1024 / streams / 1000:.1f} KB per stream at the peak, "
      f"{after / 1024:.0f} MB held {sys.argv[11]} s after the burst (idle {idle / 1024:.0f} MB); "
      f"CPU user {cpu(user1 - user0):.2f} + system {cpu(sys1 - sys0):.2f} s per million events; transit p99 {p99:.1f} ms")
PY
