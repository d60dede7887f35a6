#!/usr/bin/env bash
# Black-box: one tokengate in front of three demo engines in the realistic
# mode (2 slots each, declared as capacity). Conversations come back to the
# replica that cached their start (usage says so); a burst beyond the
# fleet's slots waits in the queue and the engines never queue inside;
# past the queue, 429 with Retry-After; a replica that starts failing its
# health check leaves rotation and comes back when it heals; /readyz says
# whether every route has a healthy target; a prompt no target's context
# holds is refused before it goes anywhere.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"

start_demo_fleet 3 --slots 2 --decode-tps 50 --prefill-ms-per-1k 200
cat > "$work/fleet.yaml" <<YAML
listeners: [{name: main, address: 127.0.0.1, port: 0}]
upstreams:
$(fleet_upstreams "capacity: {max_streams: 2, max_context_tokens: 2000}" \
  "health_check: {path: /health, interval: 250ms, timeout: 250ms}" \
  "engine_metrics: {path: /metrics, interval: 100ms}")
routes:
  - name: fleet
    models: [fleet-model]
    targets: [{upstream: e1}, {upstream: e2}, {upstream: e3}]
    affinity: {max_load_ratio: 1.5}
    queue: {max_waiting: 4, timeout: 10s}
admin: {address: 127.0.0.1, port: 0}
workers: 2
YAML
"$bin" check -c "$work/fleet.yaml" > /dev/null || fail "check refused the fleet config"
start_server "$work/fleet.yaml"
url="http://127.0.0.1:$port/v1/chat/completions"

# --- Affinity: 6 conversations of 3 turns, each turn resending the history.
system=$(printf 'You answer in one word. %.0s' $(seq 24))  # about 600 bytes: cacheable blocks
chat() {  # MESSAGES: a non-streamed answer's body
  curl -sf -m 10 "$url" -H 'content-type: application/json' \
    -d "{\"model\":\"fleet-model\",\"max_tokens\":4,\"messages\":[$1]}"
}
for c in 1 2 3 4 5 6; do
  history="{\"role\":\"system\",\"content\":\"$system\"},{\"role\":\"user\",\"content\":\"conversation $c\"}"
  for turn in 1 2 3; do
    answer=$(chat "$history") || fail "conversation $c turn $turn failed"
    cached=$(grep -o '"cached_tokens":[0-9]*' <<< "$answer" | cut -d: -f2)
    ((turn == 1 || cached > 0)) || fail "conversation $c turn $turn found nothing cached: $answer"
    history="$history,{\"role\":\"assistant\",\"content\":\"ok\"},{\"role\":\"user\",\"content\":\"turn $turn\"}"
  done
done
metrics_match '^tokengate_affinity_total{route="fleet",outcome="home"} 18' ||
  fail "not every request went by affinity: $(curl -s "http://127.0.0.1:$admin/metrics" | grep affinity)"

# --- Admission: 10 streams at once for 6 slots: 6 run, 4 wait, all succeed.
body='{"model":"fleet-model","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"count"}]}'
stream() {  # NAME
  curl -s -N -m 20 -D "$work/$1.head" -o "$work/$1.body" -w '%{http_code}' "$url" \
    -H 'content-type: application/json' -d "$body" > "$work/$1.status" || true
}
engine_waiting() {  # the engines' own queues, summed
  for e in "${engines[@]}"; do curl -sf "http://127.0.0.1:$e/metrics"; done |
    awk '/^vllm:num_requests_waiting/ {sum += $2} END {print sum + 0}'
}
asks=()
for i in $(seq 10); do
  stream "s$i" &
  asks+=($!)
done
queued=0
for _ in $(seq 40); do
  ((queued = $(curl -s "http://127.0.0.1:$admin/metrics" |
    awk '/^tokengate_admission_queue_length/ {print $2}'))) || true
  [[ $(engine_waiting) == 0 ]] || fail "an engine queued a request inside: $(engine_waiting)"
  ((queued == 4)) && break
  sleep 0.05
done
((queued == 4)) || fail "expected 4 requests in the queue, saw $queued"
wait "${asks[@]}"
for i in $(seq 10); do
  [[ $(cat "$work/s$i.status") == 200 ]] || fail "stream $i: status $(cat "$work/s$i.status")"
  grep -q '\[DONE\]' "$work/s$i.body" || fail "stream $i did not finish"
done
waited=$(grep -o '"queue_wait_us":[0-9]*' "$work/log" | cut -d: -f2 | sort -n | tail -1)
((waited > 300000)) || fail "no request logged a queue wait (longest $waited us)"

# 12 at once: 6 run, 4 wait, 2 are refused with Retry-After.
asks=()
for i in $(seq 12); do
  stream "t$i" &
  asks+=($!)
done
wait "${asks[@]}"
ok=$(cat "$work"/t*.status | grep -o 200 | wc -l)
full=$(grep -l 429 "$work"/t*.status || true)
((ok == 10)) || fail "12 at once: $ok succeeded, expected 10 (statuses: $(cat "$work"/t*.status))"
refused=$(head -1 <<< "$full")
grep -qi '^retry-after: [0-9]' "${refused%.status}.head" || fail "a 429 without Retry-After"
grep -q '"code":"queue_full"' "${refused%.status}.body" || fail "refusal: $(cat "${refused%.status}.body")"

# --- Health: e1 starts failing its checks: out of rotation, then back.
curl -sf -X POST "http://127.0.0.1:${engines[0]}/demo/fail" -d '{"status":503}' > /dev/null
for _ in $(seq 100); do metrics_match '^tokengate_upstream_probe_healthy{upstream="e1"} 0' && break; sleep 0.05; done
metrics_match '^tokengate_upstream_probe_healthy{upstream="e1"} 0' || fail "e1 stayed in rotation"
grep -q "upstream 'e1' failed 2 health checks in a row" "$work/log" ||
  fail "the ejection was not logged"
for i in $(seq 6); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' -m 10 "$url" -H 'content-type: application/json' \
    -d "{\"model\":\"fleet-model\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"h$i\"}]}") == 200 ]] ||
    fail "a request failed while e1 was out of rotation"
done
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz") == 200 ]] ||
  fail "not ready with two healthy targets"
for e in "${engines[@]:1}"; do curl -sf -X POST "http://127.0.0.1:$e/demo/fail" -d '{"status":503}' > /dev/null; done
for _ in $(seq 100); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz") == 503 ]] && break
  sleep 0.05
done
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz") == 503 ]] ||
  fail "still ready with no healthy target"
for e in "${engines[@]}"; do curl -sf -X POST "http://127.0.0.1:$e/demo/fail" -d '{"status":0}' > /dev/null; done
for _ in $(seq 100); do
  metrics_match '^tokengate_upstream_probe_healthy{upstream="e1"} 1' && break
  sleep 0.05
done
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz") == 200 ]] ||
  fail "not ready again after the engines healed"
grep -q "upstream 'e1' passed 2 health checks in a row: back in rotation" "$work/log" ||
  fail "the recovery was not logged"

# --- A prompt no target's context holds (2000 tokens): 400, sent nowhere.
asked_before=$(for e in "${engines[@]}"; do curl -sf "http://127.0.0.1:$e/demo/stats"; done |
  grep -o '"requests":[0-9]*' | cut -d: -f2 | awk '{ sum += $1 } END { print sum }')
long=$(head -c 9000 /dev/zero | tr '\0' 'x')
answer=$(curl -s -w ' %{http_code}' "$url" -H 'content-type: application/json' \
  -d "{\"model\":\"fleet-model\",\"messages\":[{\"role\":\"user\",\"content\":\"$long\"}]}")
[[ $answer == *'"code":"context_length_exceeded"'*' 400' ]] || fail "long prompt: ${answer: -300}"
asked_after=$(for e in "${engines[@]}"; do curl -sf "http://127.0.0.1:$e/demo/stats"; done |
  grep -o '"requests":[0-9]*' | cut -d: -f2 | awk '{ sum += $1 } END { print sum }')
((asked_after == asked_before)) || fail "the long prompt reached an engine"

stop_server
echo "cli_fleet: 18 turns by affinity, queue of 4 drained, 2 refused past it, e1 out and back"
