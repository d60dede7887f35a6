#!/usr/bin/env bash
# What giving memory back between bursts costs: three tokengate processes
# of the same binary, one per memory.after_burst mode (give_back, the
# default: freed pages unmapped a second after and once a burst is over;
# lazy_free: marked free, left mapped until the kernel needs them; keep:
# never given back), in alternating bursts of slow streams (scenario 3's
# shape by default). Per burst: the proxy's page faults and CPU ticks, CPU
# per million events, transit p99. On demand, not a test.
# Usage: tests/bench/bursts_kept.sh TOKENGATE_BIN [BURSTS] [STREAMS] [PAUSE_S]
#   tests/bench/bursts_kept.sh build/tokengate 4 9000 4
# WITH_NGINX=1 adds nginx (the reference, whose heap keeps its memory) as a
# fourth in each turn; TOKENS (12) and RAMP_UP (seconds over which each
# burst's streams open; none: all at once) change the bursts' shape, e.g.
# scenario 3c's: WITH_NGINX=1 TOKENS=40 RAMP_UP=5 tests/bench/bursts_kept.sh build/tokengate 3 9000 4
# MODES (default "give_back lazy_free keep") picks the tokengate processes.
# The proxies run on core 0; the demo engine and the load on core 1.
set -euo pipefail
bin=$1 bursts=${2:-4} streams=${3:-9000} pause=${4:-4}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit
tokens=${TOKENS:-12}
modes=(${MODES:-give_back lazy_free keep})

engine=$(free_port)
start_engine "$bin" "$engine"
declare -A pid_of port_of model_of
for mode in "${modes[@]}"; do
  port_of[$mode]=$(free_port)
  tokengate_config "$work/$mode.yaml" "${port_of[$mode]}" "$engine"
  echo "memory: {after_burst: $mode}" >> "$work/$mode.yaml"
  start_tokengate "$bin" "$work/$mode.yaml" "$work/$mode.log"
  pid_of[$mode]=$proxy model_of[$mode]=bench
  pids+=($proxy)
done
if [[ -n ${WITH_NGINX:-} ]]; then
  port_of[nginx]=$(free_port)
  start_nginx "${port_of[nginx]}" "$engine"
  pid_of[nginx]=$proxy model_of[nginx]=demo
  modes+=(nginx)
fi
ramp_up=() opened="at once"
[[ -z ${RAMP_UP:-} ]] || ramp_up=(--ramp-up "$RAMP_UP") opened="over $RAMP_UP s"

# burst NAME: one burst through that process
burst() {
  local pid=${pid_of[$1]} f0 u0 s0 f1 u1 s1
  read -r f0 u0 s0 < <(awk '{print $10, $14, $15}' "/proc/$pid/stat")
  taskset -c 1 "$bin" bench --url "http://127.0.0.1:${port_of[$1]}/v1" --model "${model_of[$1]}" \
    --requests "$streams" --concurrency "$streams" --max-tokens "$tokens" --prompt-tokens 20 --json "${ramp_up[@]}" \
    --extra-body "{\"demo\":{\"ttft_ms\":0,\"interval_ms\":500,\"tokens\":$tokens,\"stamp\":true}}" > "$work/r.json"
  read -r f1 u1 s1 < <(awk '{print $10, $14, $15}' "/proc/$pid/stat")
  python3 - "$work/r.json" "$1" $((f1 - f0)) $((u1 - u0)) $((s1 - s0)) "$(getconf CLK_TCK)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["ok"] == r["requests"], f"errors: {r['errors']}"
faults, user, system, tick = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
seconds = (user + system) / tick
print(f"{sys.argv[2]:<10} {faults} page faults, CPU {user + system} ticks ({user} user + {system} system), "
      f"{seconds / r['output_tokens'] * 1e6:.2f} s per million events, transit p99 {r['transit_ms']['p99']:.1f} ms")
PY
  sleep "$pause"
}

echo "$streams streams a burst, $tokens tokens 500 ms apart, opened $opened"
for _ in $(seq "$bursts"); do
  for mode in "${modes[@]}"; do burst "$mode"; done
done
