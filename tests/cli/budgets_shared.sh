#!/usr/bin/env bash
# Black-box budgets across instances: two tokengate processes share one
# real redis-server and one key's tokens-per-minute budget. 64 concurrent
# streams through each: what the engine is asked for stays within the
# budget plus one reservation per instance, and every refusal is a 429 with
# Retry-After and OpenAI's x-ratelimit-* headers. Then Redis dies: the
# instance set to `deny` answers 503, the one set to `allow_local` counts
# alone from where Redis was; each says so once in its log. Redis comes back: both use it again
# without a restart.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"
start_redis_server
start_demo_engine --decode-tps 200

key=sk-budget-test
key_sha=$("$bin" hash-key "$key")
budget=2000
# instance_config MODE: a key with `budget` tokens per minute, through Redis.
instance_config() {
  cat <<YAML
listeners: [{name: main, address: 127.0.0.1, port: 0}]
upstreams: {engine: {base_url: "http://127.0.0.1:$engine/v1"}}
routes:
  - name: chat
    models: ["*"]
    targets: [{upstream: engine}]
keys:
  - name: app
    sha256: "$key_sha"
    budget: {tokens_per_minute: $budget}
redis: {url: "redis://127.0.0.1:$redis_port", timeout: 500ms, on_store_failure: $1, replicas: 2}
admin: {address: 127.0.0.1, port: 0}
workers: 2
YAML
}
instance_config deny > "$work/a.yaml"
instance_config allow_local > "$work/b.yaml"
start_server "$work/a.yaml"
a_port=$port a_admin=$admin a_pid=$server_pid
mv "$work/log" "$work/a.log"
start_server "$work/b.yaml"
b_port=$port b_admin=$admin
mv "$work/log" "$work/b.log"
pids+=("$a_pid")

# The whole burst inside one minute window (windows are aligned to UTC).
while (($(date +%-S) > 45)); do sleep 1; done
burst_minute=$(($(date +%s) / 60))

body='{"model":"demo","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"count"}]}'
# One request per call: status in $work/out/NAME.status, head in NAME.head.
ask() {  # PORT NAME
  curl -s -N -m 20 -D "$work/out/$2.head" -o "$work/out/$2.body" -w '%{http_code}' \
    "http://127.0.0.1:$1/v1/chat/completions" -H "authorization: Bearer $key" \
    -H 'content-type: application/json' -d "$body" > "$work/out/$2.status" || true
}
mkdir -p "$work/out"
asks=()
for i in $(seq 64); do
  ask "$a_port" "a$i" &
  asks+=($!)
  ask "$b_port" "b$i" &
  asks+=($!)
done
wait "${asks[@]}"
admitted=$(cat "$work/out"/*.status | grep -o 200 | wc -l)
refused=$(cat "$work/out"/*.status | grep -o 429 | wc -l)
((admitted + refused == 128)) || fail "statuses other than 200 and 429: $(cat "$work/out"/*.status | sort | uniq -c)"

# One reservation: the body's bytes / 4 plus max_tokens.
reservation=$((${#body} / 4 + 20))
asked=$(curl -sf "http://127.0.0.1:$engine/demo/stats" | grep -o '"tokens_asked":[0-9]*' | cut -d: -f2)
((asked <= budget + 2 * reservation)) ||
  fail "the engine was asked for $asked tokens; the budget is $budget, one reservation $reservation"
# (Each instance may end holding a lease, at most an eighth of the budget.)
((admitted >= budget * 3 / 4 / reservation - 2)) ||
  fail "only $admitted admitted of a budget for $((budget / reservation))"
((refused > 0)) || fail "nothing was refused"

refusal=$(grep -l 429 "$work/out"/*.status | head -1)
head=${refusal%.status}.head
for h in retry-after x-ratelimit-limit-tokens x-ratelimit-remaining-tokens x-ratelimit-reset-tokens; do
  grep -qi "^$h: " "$head" || fail "a refusal without $h: $(cat "$head")"
done
grep -qi "^x-ratelimit-limit-tokens: $budget" "$head" || fail "the refusal names another limit: $(cat "$head")"
grep -q '"code":"rate_limit_exceeded"' "${refusal%.status}.body" || fail "refusal body: $(cat "${refusal%.status}.body")"
admitted_head=$(grep -l 200 "$work/out"/*.status | head -1)
grep -qi "^x-ratelimit-remaining-tokens: " "${admitted_head%.status}.head" ||
  fail "an admitted answer without the rate-limit headers"

# Redis dies. (A reply slower than the timeout in the burst above counts
# as an outage too: only what the logs say from here on is counted.)
a_lines=$(wc -l < "$work/a.log") b_lines=$(wc -l < "$work/b.log")
kill -9 "$redis_pid"
one() {  # PORT: the status of one non-streamed request
  curl -s -o "$work/one.body" -w '%{http_code}' -m 5 "http://127.0.0.1:$1/v1/chat/completions" \
    -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -d '{"model":"demo","max_tokens":5,"messages":[]}' || true
}
# Tokens an instance already holds as a lease (at most an eighth of the
# budget: about 15 of these requests) are spent without asking Redis; then
# the instance set to `deny` refuses.
for _ in $(seq 30); do
  status=$(one "$a_port")
  [[ $status == 200 ]] || break
done
[[ $status == 503 ]] || fail "deny: status $status with Redis down"
grep -q budget_store_unavailable "$work/one.body" || fail "deny: body $(cat "$work/one.body")"
# allow_local: counted alone, carrying on from the count Redis last gave
# this instance for the window (the burst's, less what settled since), not
# from zero, and /budgets shows it as the local view. It admits at most its
# share of what was left (two replicas: half), then 429, never 503.
local_used() {
  curl -sf "http://127.0.0.1:$b_admin/budgets" > "$work/budgets.json" || fail "no /budgets during the outage"
  grep -q '"view":"local"' "$work/budgets.json" || fail "/budgets is not the local view: $(cat "$work/budgets.json")"
  grep -o '"used":[0-9]*' "$work/budgets.json" | head -1 | cut -d: -f2
}
before=$(local_used)
((before > 0)) || fail "allow_local starts from zero: $(cat "$work/budgets.json")"
for _ in $(seq 80); do
  status=$(one "$b_port")
  [[ $status == 200 || $status == 429 ]] || fail "allow_local: status $status with Redis down"
  [[ $status == 429 ]] && break
done
after=$(local_used)
if (($(date +%s) / 60 == burst_minute)); then
  [[ $status == 429 ]] || fail "allow_local: 80 requests admitted alone from $before of $budget"
  grep -q rate_limit_exceeded "$work/one.body" || fail "allow_local: body $(cat "$work/one.body")"
  ((after <= before + (budget - before) / 2 + 20)) ||
    fail "allow_local: $((after - before)) tokens alone from $before, more than half of what was left"
fi
admin=$b_admin metrics_match '^tokengate_budget_local_fallbacks_total [1-9]' || fail "no local fallback counted"
admin=$b_admin metrics_match '^tokengate_budget_store_up 0' || fail "store_up is not 0 with Redis down"
for _ in 1 2 3; do one "$a_port" > /dev/null; one "$b_port" > /dev/null; done
for log in a b; do
  from=$((${log}_lines + 1))
  n=$(tail -n +"$from" "$work/$log.log" | grep -c "budgets: redis at .* does not answer" || true)
  ((n == 1)) || fail "instance $log logged the outage $n times: $(grep budgets: "$work/$log.log")"
done

# Redis comes back on the same port: both use it again, no restart.
start_redis || fail "redis-server did not restart"
for _ in $(seq 40); do [[ $(one "$a_port") == 200 ]] && break; sleep 0.1; done
[[ $(one "$a_port") == 200 ]] || fail "deny: Redis is back but requests are still refused"
grep -q "answers again" "$work/a.log" || fail "instance a did not log the recovery"
admin=$a_admin metrics_match '^tokengate_budget_store_up 1' || fail "store_up is not 1 after the recovery"

kill -TERM "$a_pid"
mv "$work/b.log" "$work/log"
stop_server
echo "cli_budgets_shared: $admitted admitted, $refused refused, engine asked for $asked of $budget tokens"
