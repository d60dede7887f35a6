#!/usr/bin/env bash
# Scenario 6's load in bursts with pauses between them, against one
# tokengate binary: for each burst, the TTFT p99 of the 200 KB prompts, and
# the page faults and CPU the proxy took. On demand, not a test.
#
# A pause longer than the heap keeps freed pages (a second,
# server/allocator.hpp) showed why scenario 6's tail sat above nginx's: the
# bodies' buffers were faulted in again at every burst
# (docs/performance.md, "Long bodies' buffers kept warm").
# Usage: tests/bench/idle_bursts.sh TOKENGATE_BIN [BURSTS] [PAUSE_S]
#   tests/bench/idle_bursts.sh build/tokengate 5 3
# The proxy runs on core 0; the demo engine and the load (`tokengate bench`:
# 63 prompts of 200 KB at a time, 2,048 a burst, with one 4 MB prompt at a
# time beside them) on core 1.
set -euo pipefail
bin=$1 bursts=${2:-5} pause=${3:-3}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port) port=$(free_port)
start_engine "$bin" "$engine"
start_proxy tokengate "$bin" "$port" "$engine"

# load REQUESTS CONCURRENCY PROMPT_TOKENS OUT
load() {
  taskset -c 1 "$bin" bench --url "http://127.0.0.1:$port/v1" --model "$model" --requests "$1" --concurrency "$2" \
    --max-tokens 20 --prompt-tokens "$3" --json --extra-body '{"demo":{"ttft_ms":0,"interval_ms":0,"tokens":20}}' > "$4"
}

load 64 63 50000 "$work/warm.json"  # connections
for b in $(seq "$bursts"); do
  sleep "$pause"
  read -r f0 u0 s0 < <(awk '{print $10, $14, $15}' "/proc/$proxy/stat")
  load 48 1 1000000 "$work/big.json" &
  big=$!
  load 2048 63 50000 "$work/prompts.json"
  wait "$big"
  read -r f1 u1 s1 < <(awk '{print $10, $14, $15}' "/proc/$proxy/stat")
  python3 - "$work" "$b" $((f1 - f0)) $((u1 - u0)) $((s1 - s0)) "$(getconf CLK_TCK)" <<'PY'
import json, sys
work, burst = sys.argv[1], sys.argv[2]
faults, user, system, tick = map(int, sys.argv[3:7])
r, b = (json.load(open(f"{work}/{name}.json"))[0] for name in ("prompts", "big"))
assert r["ok"] == r["requests"] and b["ok"] == b["requests"], "errors in the load"
print(f"burst {burst}: TTFT p99 {r['ttft_ms']['p99']:.1f} ms; proxy: {faults} page faults "
      f"({faults / (r['requests'] + b['requests']):.2f} a request), user {user * 1000 / tick:.0f} ms, "
      f"system {system * 1000 / tick:.0f} ms")
PY
done
