#!/usr/bin/env bash
# Black-box: a whole (not streamed) answer is billed at the usage it
# reports, not at its reservation. One request asks for up to 1,000
# tokens and gets 5: the access log line, /budgets and the token counter
# all say the engine's usage.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"
start_demo_engine

key=sk-whole-answer
cat > "$work/config.yaml" <<YAML
log_level: info
listeners: [{name: main, address: 127.0.0.1, port: 0}]
upstreams: {engine: {base_url: "http://127.0.0.1:$engine/v1"}}
routes: [{name: chat, models: ["*"], targets: [{upstream: engine}]}]
keys: [{name: app, sha256: "$("$bin" hash-key <<< "$key")", budget: {tokens_per_minute: 100000}}]
admin: {address: 127.0.0.1, port: 0}
YAML
start_server "$work/config.yaml"
# (Inside one minute's window.)
while (($(date +%-S) > 55)); do sleep 1; done

answer=$(curl -sf "http://127.0.0.1:$port/v1/chat/completions" -H "authorization: Bearer $key" \
  -H 'content-type: application/json' \
  -d '{"model":"demo","max_tokens":1000,"messages":[{"role":"user","content":"hi"}],"demo":{"tokens":5,"ttft_ms":0,"interval_ms":0}}') ||
  fail "the request failed"
prompt=$(grep -o '"prompt_tokens":[0-9]*' <<< "$answer" | cut -d: -f2)
completion=$(grep -o '"completion_tokens":[0-9]*' <<< "$answer" | cut -d: -f2)
[[ $completion == 5 && -n $prompt ]] || fail "the engine's usage: $answer"

for _ in $(seq 40); do grep -q ' info access ' "$work/log" && break; sleep 0.05; done
line=$(grep ' info access ' "$work/log" | tail -1)
grep -q "\"input_tokens\":$prompt,\"output_tokens\":5" <<< "$line" || fail "access log: $line"

used=$(curl -sf "http://127.0.0.1:$admin/budgets" | grep -o '"used":[0-9]*' | head -1 | cut -d: -f2)
((used == prompt + 5)) || fail "/budgets shows $used used, the answer used $((prompt + 5))"
metrics_match "^tokengate_tokens_total{.*type=\"output\".*} 5$" || fail "no 5 output tokens in /metrics"
stop_server
echo "cli_budgets_whole_answer: billed $used tokens for an answer that reserved $((1000 + prompt))"
