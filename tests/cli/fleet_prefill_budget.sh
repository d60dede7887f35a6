#!/usr/bin/env bash
# Black-box: capacity.max_prefill_tokens. One demo engine with 8 slots
# and a slow prefill (300 ms per 1,000 tokens); the proxy lets at most
# 4,000 prompt tokens be in prefill there at once. Three 3,000-token
# prompts sent together: the first goes at once, each of the others
# waits in the queue for the one before it to return its first token,
# though slots are free; the engine never holds two of them in prefill.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"

start_demo_engine --slots 8 --decode-tps 50 --prefill-ms-per-1k 300
cat > "$work/fleet.yaml" <<YAML
listeners: [{name: main, address: 127.0.0.1, port: 0}]
upstreams:
  e1:
    base_url: "http://127.0.0.1:$engine/v1"
    capacity: {max_streams: 8, max_prefill_tokens: 4000}
routes:
  - name: fleet
    models: [fleet-model]
    targets: [{upstream: e1}]
    queue: {max_waiting: 16, timeout: 10s}
admin: {address: 127.0.0.1, port: 0}
YAML
"$bin" check -c "$work/fleet.yaml" > /dev/null || fail "check refused the config"
start_server "$work/fleet.yaml"

ask() {  # N: a streamed answer to a 3,000-token prompt of its own
  local prompt
  prompt=$(printf "Prompt $1 goes on. %.0s" $(seq 750))  # about 12 KB
  curl -sf -m 20 -o "$work/answer$1" "http://127.0.0.1:$port/v1/chat/completions" \
    -H 'content-type: application/json' \
    -d "{\"model\":\"fleet-model\",\"max_tokens\":20,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}]}"
}
asks=()
for n in 1 2 3; do
  ask "$n" &
  asks+=($!)
done
most_prefilling=0
for _ in $(seq 60); do  # (the engine's own view: sequences admitted, none decoding yet)
  page=$(curl -sf "http://127.0.0.1:$admin/metrics")
  in=$(awk '/^tokengate_upstream_in_flight_prefill_tokens\{upstream="e1"\}/ {print $2}' <<< "$page")
  ((${in:-0} > most_prefilling)) && most_prefilling=${in:-0}
  sleep 0.05
done
wait "${asks[@]}" || fail "a request failed"
for n in 1 2 3; do grep -q '\[DONE\]' "$work/answer$n" || fail "answer $n did not finish"; done
((most_prefilling > 0 && most_prefilling <= 4000)) ||
  fail "the proxy had $most_prefilling prompt tokens in prefill at once (budget 4,000)"
waits=$(grep -o '"queue_wait_us":[0-9]*' "$work/log" | cut -d: -f2 | sort -n | tr '\n' ' ')
read -r w1 w2 w3 <<< "$waits"
((w1 < 200000 && w2 > 500000 && w3 > w2 + 500000)) ||
  fail "waits $waits µs: each prompt after the first should wait for the prefill before it (~0.9 s)"
metrics_match '^tokengate_upstream_in_flight_prefill_tokens{upstream="e1"} 0$' ||
  fail "prefill tokens still counted after every answer ended"
stop_server
echo "cli_fleet_prefill_budget: queue waits $waits µs; at most $most_prefilling tokens in prefill"
