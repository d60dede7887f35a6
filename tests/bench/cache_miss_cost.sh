#!/usr/bin/env bash
# What a response cache costs a request it cannot answer: CPU per request
# of a route with `cache: {ttl: 10m, mode: always}` whose every request
# says `Cache-Control: no-cache` (asked upstream, its key made, its answer
# copied and kept, as a miss's is) against the same route without a cache.
# Two tokengate processes of one binary share core 0 and run at the same
# time, each loaded by its own `tokengate bench` (core 1, with the demo
# engine: 20 ms to the first token, 64 tokens a millisecond apart), so
# whatever the shared machine does falls on both at once; which process
# serves the cached route swaps every round, and which load starts first
# every two, so neither's luck counts.
# Prints each round's ratio, their geometric mean and the ratio of the
# rounds' sums. CPU is the scheduler's count for each process (schedstat).
# On demand, not a test.
# PERF=1 adds a round under `perf stat`: syscalls and sleeps a request.
# Usage: tests/bench/cache_miss_cost.sh TOKENGATE_BIN [REQUESTS] [CONCURRENCY] [ROUNDS]
set -euo pipefail
bin=$1 requests=${2:-1000} concurrency=${3:-8} rounds=${4:-10}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port)
taskset -c 1 "$bin" demo-engine --port "$engine" > "$work/engine.log" 2>&1 &
pids+=($!)
ports=() procs=()
for side in 0 1; do
  port=$(free_port)
  cache_config "$work/cfg$side.yaml" "$port" "$engine"
  start_tokengate "$bin" "$work/cfg$side.yaml" "$work/proxy$side.log"
  pids+=("$proxy")
  ports+=("$port") procs+=("$proxy")
done

load() {  # SIDE MODEL [BENCH-ARGS...]
  local side=$1 model=$2
  shift 2
  cache_load "${ports[$side]}" "$model" "$requests" "$concurrency" "$work/load$side.json" "$@"
}
# round CACHED_SIDE CACHED_FIRST: both loads at once (the one started
# first ends first, and the other's last requests run alone: the order
# swaps too); prints "missed_ns asked_ns"
round() {
  local cached=$1 asked=$((1 - $1)) b0 b1 a0 a1
  b0=$(cpu_ns "${procs[0]}") b1=$(cpu_ns "${procs[1]}")
  local loads=()
  if (($2)); then
    load "$cached" cached --header 'Cache-Control: no-cache' &
    loads+=($!)
  fi
  load "$asked" asked &
  loads+=($!)
  if ! (($2)); then
    load "$cached" cached --header 'Cache-Control: no-cache' &
    loads+=($!)
  fi
  wait "${loads[@]}"
  a0=$(cpu_ns "${procs[0]}") a1=$(cpu_ns "${procs[1]}")
  local used=($((a0 - b0)) $((a1 - b1)))
  python3 -c "import json,sys; assert all(json.load(open(f))[0]['ok'] == $requests for f in sys.argv[1:])" \
    "$work/load0.json" "$work/load1.json"
  echo "${used[$cached]} ${used[$asked]}"
}
round 0 1 > /dev/null && round 1 0 > /dev/null  # (warm-up: pools filled, pages touched)
echo "$requests requests a side, $concurrency at a time, both sides at once:"
: > "$work/rounds"
for ((i = 1; i <= rounds; i++)); do
  round $((i % 2)) $((i / 2 % 2)) | tee -a "$work/rounds" |
    awk -v r="$i" -v n="$requests" '{printf "  round %d: kept as a miss %.0f us, asked %.0f us a request: %.3f\n", r, $1 / 1e3 / n, $2 / 1e3 / n, $1 / $2}'
done
python3 - "$work/rounds" << 'PY'
import math, sys
rows = [tuple(map(int, line.split())) for line in open(sys.argv[1])]
geo = math.exp(sum(math.log(m / a) for m, a in rows) / len(rows))
print(f"  geometric mean of the rounds: {geo:.3f}; all rounds together: {sum(m for m, _ in rows) / sum(a for _, a in rows):.3f}")
PY
# PERF=1: one more round (the cached load on side 0) under `perf stat`, each
# side's syscalls, sends, waits for events and sleeps a request.
if [[ -n ${PERF:-} ]]; then
  events=raw_syscalls:sys_enter,syscalls:sys_enter_sendmsg,syscalls:sys_enter_epoll_wait,context-switches
  for side in 0 1; do
    perf stat -x, -e "$events" -p "${procs[$side]}" -o "$work/perf$side" &
    perfs[$side]=$!
  done
  sleep 0.5
  round 0 1 > /dev/null
  kill -INT "${perfs[@]}"
  wait "${perfs[@]}" || true
  echo "  a request, kept as a miss / asked (perf stat, one more round):"
  paste -d, "$work/perf0" "$work/perf1" | grep -v '^#' | grep -v '^,*$' |
    awk -F, -v n="$requests" '{printf "    %-28s %7.1f / %7.1f\n", $3, $1 / n, $(1 + NF / 2) / n}'
fi
