#!/usr/bin/env bash
# Black-box: balance: fastest in front of three demo engines in the
# realistic mode (a prefix cache, 4 slots, 200 ms of prefill per 1,000
# uncached tokens). Three tenants each share a 6,000-token document among
# their users: every question after a tenant's first goes to the replica
# that holds the document, and the engine reports it cached; each choice
# is in the access log with its predicted TTFT and why; the replicas'
# learned rates, their indexes and the prediction's error are on /metrics.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"

start_demo_fleet 3 --slots 4 --decode-tps 200 --prefill-ms-per-1k 200
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
admin: {address: 127.0.0.1, port: 0}
workers: 2
YAML
"$bin" check -c "$work/fleet.yaml" > /dev/null || fail "check refused the config"
start_server "$work/fleet.yaml"
url="http://127.0.0.1:$port/v1/chat/completions"

ask() {  # TENANT QUESTION: the answer's stream (usage included)
  local document
  document=$(printf "Clause $1 of the tenant's contract. %.0s" $(seq 700))  # about 24 KB
  curl -sf -m 20 "$url" -H 'content-type: application/json' \
    -d "{\"model\":\"fleet-model\",\"max_tokens\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"messages\":[{\"role\":\"system\",\"content\":\"$document\"},{\"role\":\"user\",\"content\":\"$2\"}]}"
}
for tenant in 1 2 3; do
  for question in 1 2 3 4; do
    answer=$(ask "$tenant" "question $question") || fail "tenant $tenant question $question failed"
    cached=$(grep -o '"cached_tokens":[0-9]*' <<< "$answer" | cut -d: -f2)
    ((question == 1 || cached > 4000)) ||
      fail "tenant $tenant question $question found ${cached:-nothing} cached: $answer"
  done
done

# Each choice explained: 12 predictions, the 9 follow-ups by the cache.
predicted=$(grep -c '"fleet_predicted_ttft_ms":[0-9]' "$work/log" || true)
by_cache=$(grep -c '"fleet_reason":"cache"' "$work/log" || true)
((predicted == 12)) || fail "$predicted of 12 requests logged a predicted TTFT"
((by_cache >= 9)) || fail "only $by_cache requests went where their prompt was cached"
metrics_match '^tokengate_fleet_prefix_index_blocks{upstream="e[123]"} [1-9]' ||
  fail "no replica's index holds anything"
metrics_match '^tokengate_fleet_ttft_prediction_error_count [1-9]' ||
  fail "no prediction was checked against its answer"
metrics_match '^tokengate_fleet_prefill_tokens_per_second{upstream="e[123]"}' ||
  fail "no learned prefill rate"
stats=$(curl -sf "http://127.0.0.1:$admin/stats")
for e in e1 e2 e3; do
  grep -q "\"$e\":{\"in_flight_streams\":0,\"in_flight_prefill_tokens\":0,\"prefill_tokens_per_second\":[0-9]" <<< "$stats" ||
    fail "/stats shows no learned rates for $e: $stats"
done
metrics_match '^tokengate_fleet_cached_prompt_tokens_total{upstream="e[123]",source="reported"} [1-9]' ||
  fail "no engine's report of its cache was read"

# A fourth tenant's second user asks while the first's prefill (1.2 s) is
# still running: the proxy holds the second back until the first's token
# comes (an engine that prefills several prompts at once would otherwise
# compute the document twice; this one queues them), and the second then
# finds the document cached.
ask 4 "question 1" > "$work/t4q1" &
first=$!
sleep 0.3
second=$(ask 4 "question 2") || fail "tenant 4's second question failed"
wait "$first" || fail "tenant 4's first question failed"
cached=$(grep -o '"cached_tokens":[0-9]*' <<< "$second" | cut -d: -f2)
((cached > 4000)) || fail "a question asked during its document's prefill found ${cached:-nothing} cached"
waited=$(grep '"fleet_reason"' "$work/log" | tail -1 | grep -o '"queue_wait_us":[0-9]*' | cut -d: -f2)
((waited > 100000)) || fail "the second question waited only ${waited} µs for the document's prefill"

stop_server
echo "cli_fleet_fastest: 10 of 10 follow-up questions found their tenant's document cached"
