#!/usr/bin/env bash
# What giving memory back between bursts costs: two tokengate processes of
# the same binary, one with the default memory.after_burst (give_back:
# freed pages given back a second after, and the after-burst collect) and
# one with `keep` (pages never given back), in alternating bursts of slow
# streams opened at once (scenario 3's shape). Per burst:
# the proxy's page faults and CPU ticks, CPU per million events, transit
# p99. On demand, not a test.
# Usage: tests/bench/bursts_kept.sh TOKENGATE_BIN [BURSTS] [STREAMS] [PAUSE_S]
#   tests/bench/bursts_kept.sh build/tokengate 4 9000 4
# WITH_NGINX=1 adds nginx (the reference, whose heap keeps its memory) as a third
# in each turn; TOKENS (12) and RAMP_UP (seconds over which each burst's
# streams open; none: all at once) change the bursts' shape, e.g. scenario
# 3c's: WITH_NGINX=1 TOKENS=40 RAMP_UP=5 tests/bench/bursts_kept.sh build/tokengate 3 9000 4
# The proxies run on core 0; the demo engine and the load on core 1.
set -euo pipefail
bin=$1 bursts=${2:-4} streams=${3:-9000} pause=${4:-4}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port)
start_engine "$bin" "$engine"
given_port=$(free_port) kept_port=$(free_port)
tokengate_config "$work/given.yaml" "$given_port" "$engine"
tokengate_config "$work/kept.yaml" "$kept_port" "$engine"
start_tokengate "$bin" "$work/given.yaml" "$work/given.log"
given=$proxy
pids+=($given)
echo "memory: {after_burst: keep}" >> "$work/kept.yaml"
start_tokengate "$bin" "$work/kept.yaml" "$work/kept.log"
kept=$proxy
pids+=($kept)
if [[ -n ${WITH_NGINX:-} ]]; then
  nginx_port=$(free_port)
  start_nginx "$nginx_port" "$engine"
  nginx=$proxy
fi
tokens=${TOKENS:-12}

# burst PID PORT LABEL [MODEL]
burst() {
  local f0 u0 s0 f1 u1 s1
  read -r f0 u0 s0 < <(awk '{print $10, $14, $15}' "/proc/$1/stat")
  taskset -c 1 "$bin" bench --url "http://127.0.0.1:$2/v1" --model bench --requests "$streams" \
    --concurrency "$streams" --max-tokens 12 --prompt-tokens 20 --json \
    --extra-body '{"demo":{"ttft_ms":0,"interval_ms":500,"tokens":12,"stamp":true}}' > "$work/r.json"
  read -r f1 u1 s1 < <(awk '{print $10, $14, $15}' "/proc/$1/stat")
  python3 - "$work/r.json" "$3" $((f1 - f0)) $((u1 - u0)) $((s1 - s0)) "$(getconf CLK_TCK)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["ok"] == r["requests"], f"errors: {r['errors']}"
faults, user, system, tick = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
seconds = (user + system) / tick
print(f"{sys.argv[2]}: {faults} page faults, CPU {user + system} ticks ({user} user + {system} system), "
      f"{seconds / r['output_tokens'] * 1e6:.2f} s per million events, transit p99 {r['transit_ms']['p99']:.1f} ms")
PY
  sleep "$pause"
}

for _ in $(seq "$bursts"); do
  burst "$given" "$given_port" "given back"
  burst "$kept" "$kept_port" "kept      "
  [[ -z ${WITH_NGINX:-} ]] || burst "$nginx" "$nginx_port" "nginx     " demo
done
