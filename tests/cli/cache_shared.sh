#!/usr/bin/env bash
# Black-box response cache across instances: two tokengate processes keep
# their answers in one real redis-server (`cache: {store: redis}`). An
# answer process A kept is a hit on process B, which never asks its
# engine, in either form. Then Redis dies: both answer every request as a
# miss from the upstream, 200 with the answer, each within a bounded wait.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"
start_redis_server
start_demo_engine --decode-tps 500

key=sk-cache-shared
key_sha=$("$bin" hash-key "$key")
cat > "$work/cache.yaml" <<YAML
listeners: [{name: main, address: 127.0.0.1, port: 0}]
upstreams: {engine: {base_url: "http://127.0.0.1:$engine/v1"}}
routes:
  - name: chat
    models: ["*"]
    targets: [{upstream: engine}]
    cache: {ttl: 60s}
keys:
  - {name: app, sha256: "$key_sha"}
redis: {url: "redis://127.0.0.1:$redis_port", timeout: 200ms}
cache: {store: redis}
admin: {address: 127.0.0.1, port: 0}
workers: 2
YAML
start_server "$work/cache.yaml"
a_port=$port a_admin=$admin a_pid=$server_pid
mv "$work/log" "$work/a.log"
start_server "$work/cache.yaml"
b_port=$port b_admin=$admin
mv "$work/log" "$work/b.log"
pids+=("$a_pid")

# ask PORT NAME STREAM SAY: one request; its head, body and status under $work/NAME.*,
# and the milliseconds it took in $work/NAME.ms.
ask() {
  local body="{\"model\":\"demo\",\"temperature\":0,\"max_tokens\":20,\"stream\":$3,"
  body+="\"messages\":[{\"role\":\"user\",\"content\":\"$4\"}]}"
  local start=$(date +%s%N)
  curl -s -N -m 10 -D "$work/$2.head" -o "$work/$2.body" -w '%{http_code}' \
    "http://127.0.0.1:$1/v1/chat/completions" -H "authorization: Bearer $key" \
    -H 'content-type: application/json' -H 'x-demo: {"tokens":5,"interval_ms":1}' \
    -d "$body" > "$work/$2.status" || true
  echo $((($(date +%s%N) - start) / 1000000)) > "$work/$2.ms"
}
cache_of() { grep -i '^x-tokengate-cache:' "$work/$1.head" | tr -d '\r' | cut -d' ' -f2; }
# The answer's text, streamed or whole.
text_of() {
  grep -o '"content":"[^"]*"' "$work/$1.body" | cut -d'"' -f4 | tr -d '\n'
}
engine_asked() { curl -sf "http://127.0.0.1:$engine/demo/stats" | grep -o '"requests":[0-9]*' | cut -d: -f2; }
stored() {  # ADMIN: the answers this instance kept
  curl -sf "http://127.0.0.1:$1/metrics" | grep '^tokengate_cache_stored_total{route="chat"}' |
    awk '{print $2}'
}

for form in true false; do
  say="kept by a, streamed $form"
  ask "$a_port" "a_$form" "$form" "$say"
  [[ $(cat "$work/a_$form.status") == 200 ]] || fail "a: status $(cat "$work/a_$form.status")"
  [[ $(cat "$work/a_$form.body") == *'"content":'* ]] || fail "a: body $(cat "$work/a_$form.body")"
  [[ -n $(text_of "a_$form") ]] || fail "a: no text in $(cat "$work/a_$form.body")"
  [[ $(cache_of "a_$form") == miss ]] || fail "a: the first answer is not a miss: $(cat "$work/a_$form.head")"
  # (kept once its exchange has ended, a moment after the client has it)
  for _ in $(seq 40); do [[ $(stored "$a_admin") == "${n_kept:-0}" ]] || break; sleep 0.05; done
  n_kept=$(stored "$a_admin")
  asked=$(engine_asked)
  # b never asked: the same request streamed and whole, both hits from a's entry
  for b_form in true false; do
    ask "$b_port" "b_${form}_$b_form" "$b_form" "$say"
    name="b_${form}_$b_form"
    [[ $(cat "$work/$name.status") == 200 ]] || fail "b: status $(cat "$work/$name.status")"
    [[ $(cache_of "$name") == hit ]] || fail "b: not a hit of a's answer: $(cat "$work/$name.head")"
    [[ $(text_of "$name") == "$(text_of "a_$form")" ]] ||
      fail "b's hit says '$(text_of "$name")', a's answer '$(text_of "a_$form")'"
  done
  [[ $(engine_asked) == "$asked" ]] || fail "a hit on b reached the engine"
done
admin=$b_admin metrics_match '^tokengate_cache_requests_total{route="chat",result="hit"} 4' ||
  fail "b did not count its 4 hits"
admin=$b_admin metrics_match '^tokengate_cache_store_up 1' || fail "b's store is not up"

# Redis dies: misses, answered by the engine, each within the Redis timeout
# (200 ms) and the answer's own time, never an error.
kill -9 "$redis_pid"
wait "$redis_pid" 2> /dev/null || true
slowest=0
for i in 1 2 3; do
  for who in a b; do
    p=${who}_port
    ask "${!p}" "down_${who}_$i" false "kept by a, streamed false"
    name="down_${who}_$i"
    [[ $(cat "$work/$name.status") == 200 ]] || fail "$who with Redis down: status $(cat "$work/$name.status") $(cat "$work/$name.body")"
    [[ $(cache_of "$name") == miss ]] || fail "$who with Redis down: $(cat "$work/$name.head")"
    [[ $(text_of "$name") == "$(text_of a_false)" ]] || fail "$who with Redis down: body $(cat "$work/$name.body")"
    ms=$(cat "$work/$name.ms")
    ((ms > slowest)) && slowest=$ms
    ((ms < 1000)) || fail "$who with Redis down took $ms ms"
  done
done
admin=$a_admin metrics_match '^tokengate_cache_store_up 0' || fail "a's store is still up"
admin=$b_admin metrics_match '^tokengate_cache_store_up 0' || fail "b's store is still up"

kill -TERM "$a_pid"
mv "$work/b.log" "$work/log"
stop_server
echo "cli_cache_shared: 4 hits on b of a's answers; with Redis down 6 misses, the slowest ${slowest} ms"
