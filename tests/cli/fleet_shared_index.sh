#!/usr/bin/env bash
# Black-box: two tokengate instances in front of one fleet of three demo
# engines, sharing what they send each replica through a real
# redis-server. Each tenant's first question reaches instance A; its next
# two reach instance B, which has never seen the tenant: B sends them to
# the replica A chose (the access log says "cache"), and the engine says
# the tenant's document was cached there.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"
start_redis_server

start_demo_fleet 3 --slots 4 --decode-tps 200 --prefill-ms-per-1k 100
cat > "$work/fleet.yaml" <<YAML
listeners: [{name: main, address: 127.0.0.1, port: 0}]
upstreams:
$(fleet_upstreams "capacity: {max_streams: 4, kv_tokens: 100000}")
routes:
  - name: fleet
    models: [fleet-model]
    targets: [{upstream: e1}, {upstream: e2}, {upstream: e3}]
    balance: fastest
    queue: {max_waiting: 16, timeout: 10s}
redis: {url: "redis://127.0.0.1:$redis_port", timeout: 500ms}
admin: {address: 127.0.0.1, port: 0}
workers: 2
YAML
start_server "$work/fleet.yaml"
a_port=$port a_admin=$admin a_pid=$server_pid
mv "$work/log" "$work/a.log"
start_server "$work/fleet.yaml"
b_port=$port
pids+=("$a_pid")

ask() {  # PORT TENANT QUESTION: the answer's stream (usage included)
  local document
  document=$(printf "Clause $2 of the tenant's contract. %.0s" $(seq 700))  # about 24 KB
  curl -sf -m 20 "http://127.0.0.1:$1/v1/chat/completions" -H 'content-type: application/json' \
    -d "{\"model\":\"fleet-model\",\"max_tokens\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"messages\":[{\"role\":\"system\",\"content\":\"$document\"},{\"role\":\"user\",\"content\":\"$3\"}]}"
}
received() {  # how many of A's prompts B has received so far
  local page
  page=$(curl -sf "http://127.0.0.1:$admin/metrics") || true
  awk '/^tokengate_fleet_shared_prompts_total\{direction="received"\}/ {n = $2} END {print n + 0}' \
    <<< "$page"
}
for tenant in 1 2 3; do
  ask "$a_port" "$tenant" "question 1" > /dev/null || fail "tenant $tenant's first question failed"
  for _ in $(seq 100); do  # (until the message has crossed Redis)
    (($(received) >= tenant)) && break
    sleep 0.02
  done
  for question in 2 3; do
    answer=$(ask "$b_port" "$tenant" "question $question") || fail "tenant $tenant question $question failed"
    cached=$(grep -o '"cached_tokens":[0-9]*' <<< "$answer" | cut -d: -f2)
    ((cached > 4000)) ||
      fail "tenant $tenant's question $question through B found ${cached:-nothing} cached: $answer"
  done
done
by_cache=$(grep -c '"fleet_reason":"cache"' "$work/log" || true)
((by_cache == 6)) || fail "B sent $by_cache of 6 questions where the cache was"
page=$(curl -sf "http://127.0.0.1:$a_admin/metrics")
grep -q '^tokengate_fleet_shared_prompts_total{direction="published"} [1-9]' <<< "$page" ||
  fail "A published nothing: $(grep shared_prompts <<< "$page")"
metrics_match '^tokengate_fleet_shared_prompts_total{direction="received"} [3-9]' ||
  fail "B received none of A's prompts"
stop_server
echo "cli_fleet_shared_index: 6 of 6 questions through B found what A had sent cached"
