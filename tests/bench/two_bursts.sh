#!/usr/bin/env bash
# One proxy process (tokengate or nginx) through bursts of slow streams a
# few seconds apart: per burst, the proxy's CPU ticks (user + system) and
# page faults, from /proc. Whether a burst finds the last one's memory
# still resident shows as its faults, and what faulting it in again costs
# as its ticks. On demand, not a test.
# Usage: tests/bench/two_bursts.sh tokengate|nginx TOKENGATE_BIN [STREAMS] [BURSTS] [PAUSE_S]
#   scenario 3c's shape, twice:   two_bursts.sh nginx build/tokengate 9000 2 4
# The load: STREAMS streams opened over RAMP_UP (5) seconds, TOKENS (40)
# tokens 500 ms apart. Extra tokengate config lines (e.g. "memory: {after_burst: keep}")
# come from TOKENGATE_YAML; mimalloc's own variables (MIMALLOC_*) pass through.
# The proxy runs on core 0; the demo engine and the load on core 1.
set -euo pipefail
target=$1 bin=$2 streams=${3:-9000} bursts=${4:-2} pause=${5:-4}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit
tokens=${TOKENS:-40}

engine=$(free_port) port=$(free_port)
start_engine "$bin" "$engine"
start_proxy "$target" "$bin" "$port" "$engine"  # (TOKENGATE_YAML: bench_lib.sh)
ticks=$(getconf CLK_TCK)
for ((b = 1; b <= bursts; b++)); do
  read -r f0 u0 s0 < <(awk '{print $10, $14, $15}' "/proc/$proxy/stat")
  taskset -c 1 "$bin" bench --url "http://127.0.0.1:$port/v1" --model "$model" --requests "$streams" \
    --concurrency "$streams" --max-tokens "$tokens" --prompt-tokens 20 --json --ramp-up "${RAMP_UP:-5}" \
    --extra-body "{\"demo\":{\"ttft_ms\":0,\"interval_ms\":500,\"tokens\":$tokens}}" > "$work/r.json"
  read -r f1 u1 s1 < <(awk '{print $10, $14, $15}' "/proc/$proxy/stat")
  ok=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))[0]; print(r["ok"], "/", r["requests"], sep="")' "$work/r.json")
  echo "$target burst $b: $ok ok, CPU $((u1 - u0 + s1 - s0)) ticks of 1/$ticks s ($((u1 - u0)) user + $((s1 - s0)) system)," \
    "$((f1 - f0)) page faults, resident $(awk '/VmRSS/ {print $2}' "/proc/$proxy/status") KB after" \
    "(of which lazily freed: $(awk '/LazyFree/ {print $2}' "/proc/$proxy/smaps_rollup") KB)"
  ((b == bursts)) || sleep "$pause"
done
