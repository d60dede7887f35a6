#!/usr/bin/env bash
# Whether a long-lived tokengate process keeps whole bursts, two builds
# side by side: PROCESSES processes of each (OLD, NEW, OLD, NEW, ...), each
# taking BURSTS bursts of STREAMS 20-token streams opened at once, its RSS
# read as each burst ends and WAIT_S seconds later. A burst counts as kept
# (*) when over 3 KB a stream stays above the idle process WAIT_S seconds
# after it: at 9,000 streams one given back leaves 7-15 MB above idle,
# one kept 38-71. Not a share of the RSS as the burst
# ends: by then the heap may have given back part of it. The pool is small
# (POOL_SIZE 8) so that its idle connections do not count. Also, per side,
# the page faults and CPU time of the quiet seconds after each burst (what
# the after-burst collects cost; median of the bursts). On demand, not a
# test (about 12 s a burst at 9,000 streams).
# Usage: tests/bench/bursts_held.sh OLD_BIN NEW_BIN [PROCESSES] [BURSTS] [STREAMS] [WAIT_S]
set -euo pipefail
old=$1 new=$2 processes=${3:-4} bursts=${4:-10} streams=${5:-9000} wait_s=${6:-8}
export POOL_SIZE=${POOL_SIZE:-8}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port)
start_engine "$new" "$engine"
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$proxy/status"; }
faults() { awk '{print $10}' "/proc/$proxy/stat"; }
# nanoseconds on the CPU, all the proxy's threads
cpu_ns() { python3 -c "import glob; print(sum(int(open(f).read().split()[0]) for f in glob.glob('/proc/$proxy/task/*/schedstat')))"; }
declare -A kept=([old]=0 [new]=0) total=([old]=0 [new]=0) quiet=([old]="" [new]="")
for process in $(seq "$processes"); do
  for side in old new; do
    bin=$old
    [[ $side == new ]] && bin=$new
    port=$(free_port)
    start_proxy tokengate "$bin" "$port" "$engine"
    sleep 1
    idle=$(rss_kb)
    line="$side process $process (idle $((idle / 1024)) MB):"
    for _ in $(seq "$bursts"); do
      taskset -c 1 "$new" bench --url "http://127.0.0.1:$port/v1" --model bench --requests "$streams" \
        --concurrency "$streams" --max-tokens 20 --prompt-tokens 20 --json \
        --extra-body '{"demo":{"ttft_ms":0,"interval_ms":50,"tokens":20}}' > "$work/r.json"
      ended=$(rss_kb) f0=$(faults) c0=$(cpu_ns)
      python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))[0]; sys.exit(r["ok"] != r["requests"])' "$work/r.json" ||
        { echo "errors in the load" >&2; exit 1; }
      sleep "$wait_s"
      later=$(rss_kb) f1=$(faults) c1=$(cpu_ns)
      quiet[$side]+="$((f1 - f0)) $(((c1 - c0) / 1000))"$'\n'
      mark=""
      if ((later - idle > streams * 3)); then mark="*" kept[$side]=$((kept[$side] + 1)); fi
      total[$side]=$((total[$side] + 1))
      line+=" $((ended / 1024))->$((later / 1024))$mark"
    done
    echo "$line"
    kill "$proxy"
    wait "$proxy" 2> /dev/null || true
  done
done
echo "kept (*): old ${kept[old]} of ${total[old]} bursts, new ${kept[new]} of ${total[new]}"
for side in old new; do
  python3 -c '
import statistics, sys
rows = [list(map(int, line.split())) for line in sys.stdin if line.strip()]
print(f"{sys.argv[1]}: in the {sys.argv[2]} s after a burst, median {statistics.median(r[0] for r in rows):.0f} page faults "
      f"and {statistics.median(r[1] for r in rows) / 1000:.1f} ms on the CPU")' "$side" "$wait_s" <<< "${quiet[$side]}"
done
