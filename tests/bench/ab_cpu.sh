#!/usr/bin/env bash
# What one change bought: CPU per relayed event (and event transit) of two
# tokengate binaries under the same load, in alternating rounds (A B A B …)
# so that the noise of a shared machine falls on both. On demand, not a test.
# Usage: tests/bench/ab_cpu.sh OLD_BIN NEW_BIN [ROUNDS] [STREAMS] [INTERVAL_MS] [TOKENS] [REQUESTS]
#   slow streams (scenario 3 in small): ab_cpu.sh OLD NEW 3 1000 100
#   fast streams (scenario 2's shape):  ab_cpu.sh OLD NEW 4 64 0 256 1024
#   long prompts (scenario 6's shape): PROMPT_TOKENS=50000 ab_cpu.sh OLD NEW 5 64 0 20 512
#   Anthropic streams (event: and data: lines, /v1/messages): API=anthropic ab_cpu.sh OLD NEW 4 64 0 256 1024
#   long prompts in another script, raw or as \u escapes (the load's --prompt-script, --escape-non-ascii):
#     PROMPT_TOKENS=50000 PROMPT_SCRIPT=han ESCAPE=1 ab_cpu.sh OLD NEW 4 63 0 20 512
#   more demo knobs, e.g. streams of tool-call arguments: DEMO='"tool_call":true' ab_cpu.sh OLD NEW 4 64 0 256 1024
#   the OpenAI Python SDK's request header fields (bench_lib.sh): SDK_HEADERS=1 ab_cpu.sh OLD NEW ...
# STREAMS is the concurrency; REQUESTS (default STREAMS) the requests per
# round. The proxy runs on core 0; the demo engine (stamping its events) and
# the load (`tokengate bench`) on core 1.
set -euo pipefail
old=$1 new=$2 rounds=${3:-3} streams=${4:-1000} interval=${5:-50} tokens=${6:-100} requests=${7:-${4:-1000}}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port)
start_engine "$new" "$engine"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
one_round() {  # $1: binary; prints "cpu_s_per_million_events transit_p50_ms transit_p99_ms"
  local port; port=$(free_port)
  tokengate_config "$work/cfg.yaml" "$port" "$engine"
  local proxy
  start_tokengate "$1" "$work/cfg.yaml" "$work/proxy.log"
  local before; before=$(cpu_ticks "$proxy")
  taskset -c 1 "$new" bench --url "$scheme://$host:$port/v1" --model bench --requests "$requests" \
    --concurrency "$streams" --max-tokens "$tokens" --prompt-tokens "${PROMPT_TOKENS:-20}" --json ${API:+--api "$API"} "${sdk_extra[@]}" \
    ${PROMPT_SCRIPT:+--prompt-script "$PROMPT_SCRIPT"} ${ESCAPE:+--escape-non-ascii} \
    --extra-body "{\"demo\":{\"ttft_ms\":0,\"interval_ms\":$interval,\"tokens\":$tokens,\"stamp\":true${DEMO:+,$DEMO}}}" > "$work/r.json"
  local after; after=$(cpu_ticks "$proxy")
  kill "$proxy"; wait "$proxy" 2> /dev/null || true
  python3 - "$work/r.json" $((after - before)) "$(getconf CLK_TCK)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
cpu = int(sys.argv[2]) / int(sys.argv[3])
assert r["ok"] == r["requests"], f"errors: {r['errors']}"
# (No transit where the source's events carry no stamp: the demo engine
# stamps chat and Responses events, not Anthropic's.)
transit = r["transit_ms"]
print(f"{cpu / r['output_tokens'] * 1e6:.2f} {transit['p50'] or float('nan'):.3f} {transit['p99'] or float('nan'):.3f}")
PY
}
: > "$work/old" ; : > "$work/new"
for i in $(seq "$rounds"); do
  one_round "$old" >> "$work/old"
  one_round "$new" >> "$work/new"
done
python3 - "$work/old" "$work/new" "$streams" "$interval" <<'PY'
import statistics, sys
rows = {name: [list(map(float, l.split())) for l in open(path)] for name, path in (("old", sys.argv[1]), ("new", sys.argv[2]))}
print(f"{sys.argv[3]} streams, a token every {sys.argv[4]} ms; medians of {len(rows['old'])} alternating rounds")
print("binary  CPU s/M events  transit p50 ms  transit p99 ms   (rounds: CPU)")
med = {}
for name, rs in rows.items():
    med[name] = [statistics.median(col) for col in zip(*rs)]
    print(f"{name:7} {med[name][0]:14.2f}  {med[name][1]:14.3f}  {med[name][2]:14.3f}   {[r[0] for r in rs]}")
print(f"new/old CPU per event: {med['new'][0] / med['old'][0]:.3f}")
PY
