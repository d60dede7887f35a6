#!/usr/bin/env bash
# User and system CPU time per request of one proxy (tokengate or nginx)
# under one load: where opening a stream's cost goes, user space or the
# kernel. From /proc (10 ms ticks: use thousands of requests). On demand,
# not a test. PRELOAD=/path/lib.so runs tokengate on another heap
# (LD_PRELOAD, see start_proxy), for a quick comparison of allocators without a build.
# Usage: tests/bench/cpu_split.sh tokengate|nginx TOKENGATE_BIN [STREAMS] [INTERVAL_MS] [TOKENS] [REQUESTS]
#   short streams opened by thousands: cpu_split.sh nginx build/tokengate 2000 100 2 8000
#   Anthropic streams: API=anthropic cpu_split.sh tokengate build/tokengate 64 0 256 2048
# DEMO adds demo knobs, e.g. a hosted provider's response head: DEMO='"provider_head":true'.
# The proxy runs on core 0; the demo engine and the load on core 1.
set -euo pipefail
target=$1 bin=$2 streams=${3:-2000} interval=${4:-100} tokens=${5:-2} requests=${6:-8000}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port) port=$(free_port)
start_engine "$bin" "$engine"
start_proxy "$target" "$bin" "$port" "$engine"
read -r user0 sys0 < <(awk '{print $14, $15}' "/proc/$proxy/stat")
taskset -c 1 "$bin" bench --url "http://127.0.0.1:$port/v1" --model "$model" --requests "$requests" \
  --concurrency "$streams" --max-tokens "$tokens" --prompt-tokens 20 --json ${API:+--api "$API"} \
  --extra-body "{\"demo\":{\"ttft_ms\":0,\"interval_ms\":$interval,\"tokens\":$tokens${DEMO:+,$DEMO}}}" > "$work/r.json"
read -r user1 sys1 < <(awk '{print $14, $15}' "/proc/$proxy/stat")
ticks=$(getconf CLK_TCK)
python3 - "$work/r.json" "$target" "$requests" "$ticks" "$user0" "$sys0" "$user1" "$sys1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["ok"] == r["requests"], f"errors: {r['errors']}"
target, requests, ticks = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
user0, sys0, user1, sys1 = map(int, sys.argv[5:9])
per = lambda t: t / ticks / requests * 1e6
print(f"{target}: user {per(user1 - user0):.1f} us, system {per(sys1 - sys0):.1f} us per request")
PY
