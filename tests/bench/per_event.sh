#!/usr/bin/env bash
# Where a proxy's time goes per relayed event: its CPU and its syscalls
# (each kind, and the reads that failed with EAGAIN) divided by the events of
# one load, for tokengate or for nginx under the same load. On demand, not a
# test; needs perf (linux-perf) and, for nginx, the nginx package.
# Usage: tests/bench/per_event.sh tokengate|nginx TOKENGATE_BIN [STREAMS] [INTERVAL_MS] [TOKENS] [REQUESTS]
#   slow streams:       per_event.sh nginx build/tokengate 2000 100 100
#   one connection:     per_event.sh nginx build/tokengate 1 0 20 20000
#   long prompts:       PROMPT_TOKENS=50000 per_event.sh nginx build/tokengate 64 0 20 512
# EXTRA_CALLS="timerfd_settime epoll_ctl" counts those syscalls too.
# DEMO adds demo knobs, e.g. a hosted provider's response head: DEMO='"provider_head":true';
# SDK_HEADERS=1 sends the OpenAI Python SDK's header fields (bench_lib.sh).
# The proxy runs on core 0; the demo engine and the load (`tokengate bench`)
# on core 1. TOKENGATE_BIN also provides the engine and the load for nginx.
set -euo pipefail
target=$1 bin=$2 streams=${3:-2000} interval=${4:-100} tokens=${5:-100} requests=${6:-${3:-2000}}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port) port=$(free_port)
start_engine "$bin" "$engine"
start_proxy "$target" "$bin" "$port" "$engine"

taskset -c 1 "$bin" bench --url "$scheme://$host:$port/v1" --model "$model" --requests "$requests" \
  --concurrency "$streams" --max-tokens "$tokens" --prompt-tokens "${PROMPT_TOKENS:-20}" --json "${sdk_extra[@]}" \
  --extra-body "{\"demo\":{\"ttft_ms\":0,\"interval_ms\":$interval,\"tokens\":$tokens${DEMO:+,$DEMO}}}" > "$work/r.json" &
load=$!
events=()
for call in recvfrom recvmsg read readv sendmsg sendto write writev epoll_wait ${EXTRA_CALLS:-}; do
  events+=(-e "syscalls:sys_exit_$call")
done
events+=(-e syscalls:sys_exit_recvfrom --filter "ret < 0" -e syscalls:sys_exit_recvmsg --filter "ret < 0")
# MEASURE=engine counts the demo engine instead of the proxy (it must not
# be the bottleneck of what is measured).
measured=$proxy
[[ ${MEASURE:-proxy} == engine ]] && measured=${pids[0]} target="$target (the engine behind it)"
perf stat -x, -e task-clock "${events[@]}" -p "$measured" -o "$work/stat.csv" &
stat=$!
wait "$load"
kill -INT "$stat"
wait "$stat" || true
python3 - "$work/r.json" "$work/stat.csv" "$target" <<'PY'
import csv, json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["ok"] == r["requests"], f"errors: {r['errors']}"
events = r["output_tokens"]
seen, parts = set(), []
for row in csv.reader(line for line in open(sys.argv[2]) if line.strip() and not line.startswith("#")):
    value, name = row[0], row[2]
    if not value.replace(".", "").isdigit() or float(value) == 0:
        continue
    if name == "task-clock":
        parts.append(f"CPU {float(value) * 1000 / events:.2f} us")
        continue
    call = name.split("sys_exit_")[1]
    label = f"{call} EAGAIN" if call in seen else call  # the filtered copy comes second
    seen.add(call)
    parts.append(f"{label} {float(value) / events:.3f}")
print(f"{sys.argv[3]}: {int(events)} events; per event: " + ", ".join(parts))
PY
