#!/usr/bin/env bash
# Whether tokengate gives a burst's memory back when nothing follows it.
# TRIALS times: a fresh proxy, one burst of STREAMS five-token streams
# opened at once, then nothing for WAIT_S seconds. A trial kept the burst
# when the proxy still holds over 80 % of what it held as the burst ended
# (one in ten did, before the fix in server/allocator.cpp).
# Each trial starts its burst at another point of the proxy's
# once-a-second check. On demand, not a test: tests/cli/memory_after_burst.sh
# checks one such burst.
# Usage: tests/bench/idle_after_burst.sh TOKENGATE_BIN [TRIALS] [STREAMS] [WAIT_S]
# TOKENGATE_YAML adds to the proxy's config (bench_lib.sh).
set -euo pipefail
bin=$1 trials=${2:-10} streams=${3:-2000} wait_s=${4:-6}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port)
start_engine "$bin" "$engine"
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$proxy/status"; }
kept=0
for trial in $(seq "$trials"); do
  port=$(free_port)
  start_proxy tokengate "$bin" "$port" "$engine"
  sleep "0.$((RANDOM % 10))"
  taskset -c 1 "$bin" bench --url "http://127.0.0.1:$port/v1" --model bench --requests "$streams" \
    --concurrency "$streams" --max-tokens 5 --prompt-tokens 20 --json \
    --extra-body '{"demo":{"ttft_ms":0,"interval_ms":200,"tokens":5}}' > "$work/r.json"
  ended=$(rss_kb)
  sleep "$wait_s"
  later=$(rss_kb)
  verdict="given back"
  if ((later * 10 > ended * 8)); then verdict="KEPT" kept=$((kept + 1)); fi
  echo "trial $trial: ${ended} KB as the burst ended, ${later} KB ${wait_s} s later: $verdict"
  kill "$proxy"
  wait "$proxy" 2> /dev/null || true
done
echo "$kept of $trials bursts kept"
