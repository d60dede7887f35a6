#!/usr/bin/env bash
# What each proxy adds to an event's way, nginx against tokengate under the
# same load, in alternating rounds (direct, nginx, tokengate, …): the
# transit of each token event from the demo engine's stamp (taken as it
# writes the event) to the event's arrival at the client's socket (the
# kernel's stamp, so the load's own delays are not counted). Direct's
# transit is the kernel's alone (microseconds); a proxy's is its wake-up,
# its work and its queue. On demand, not a test.
# Usage: tests/bench/transit.sh TOKENGATE_BIN [ROUNDS] [STREAMS] [INTERVAL_MS] [TOKENS]
#   one stream:              transit.sh build/tokengate 3 1 20 100
#   2,000 streams at 100 ms: transit.sh build/tokengate 3 2000 100 30
#   9,000 streams opened over 5 s (their tokens spread over the interval):
#                            RAMP_UP=5 transit.sh build/tokengate 3 9000 500 40
# The proxy runs on core 0; the demo engine and the load on core 1.
set -euo pipefail
bin=$1 rounds=${2:-3} streams=${3:-1000} interval=${4:-100} tokens=${5:-30}
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit

engine=$(free_port)
start_engine "$bin" "$engine"
nginx_port=$(free_port)
start_nginx "$nginx_port" "$engine"
tg_port=$(free_port)
tokengate_config "$work/cfg.yaml" "$tg_port" "$engine"
start_tokengate "$bin" "$work/cfg.yaml" "$work/proxy.log"
pids+=("$proxy")
sleep 0.3

one_round() {  # $1: target name, $2: port, $3: model; prints "target p50 p95 p99 count"
  taskset -c 1 "$bin" bench --url "http://127.0.0.1:$2/v1" --model "$3" --requests "$streams" \
    --concurrency "$streams" --max-tokens "$tokens" --prompt-tokens 20 --json ${RAMP_UP:+--ramp-up "$RAMP_UP"} \
    --extra-body "{\"demo\":{\"ttft_ms\":0,\"interval_ms\":$interval,\"tokens\":$tokens,\"stamp\":true}}" > "$work/r.json"
  python3 - "$1" "$work/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))[0]
t = r["transit_ms"]
print(f'{sys.argv[1]} {t["p50"]:.4f} {t["p95"]:.4f} {t["p99"]:.4f} {t["count"]}')
PY
}
for ((i = 0; i < rounds; i++)); do
  one_round direct "$engine" demo
  one_round nginx "$nginx_port" demo
  one_round tokengate "$tg_port" bench
done > "$work/rounds.txt"
python3 - "$work/rounds.txt" "$streams" "$interval" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"{sys.argv[2]} streams, a token every {sys.argv[3]} ms: transit, engine's write to the client's socket "
      f"(ms, medians of {len(rows) // 3} rounds)")
print(f"{'target':10} {'p50':>9} {'p95':>9} {'p99':>9} {'events':>8}")
med = {}
for name in ("direct", "nginx", "tokengate"):
    mine = [r for r in rows if r[0] == name]
    med[name] = [statistics.median(float(r[i]) for r in mine) for i in (1, 2, 3)]
    print(f"{name:10} {med[name][0]:9.3f} {med[name][1]:9.3f} {med[name][2]:9.3f} {mine[0][4]:>8}")
added = {n: [med[n][i] - med["direct"][i] for i in range(3)] for n in ("nginx", "tokengate")}
print("added by the proxy, tokengate / nginx: " +
      ", ".join(f"{q} {added['tokengate'][i]:.3f} / {added['nginx'][i]:.3f} ms"
                for i, q in enumerate(("p50", "p95", "p99"))))
PY
