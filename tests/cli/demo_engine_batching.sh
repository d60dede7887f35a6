#!/usr/bin/env bash
# Black-box: the demo engine's realistic mode. Two slots: of four streams
# sent at once, two run and two wait (vLLM's gauges on /metrics say so)
# and the waiting ones end later; a conversation that
# resends its history prefills only what is new, and says so in
# usage.prompt_tokens_details.cached_tokens, while an unrelated prompt
# finds nothing cached.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"
start_demo_engine --slots 2 --decode-tps 50 --prefill-ms-per-1k 20

ask() {  # NAME BODY: a streamed chat; how long it took in NAME.time
  curl -s -N -m 20 -o "$work/$1.body" -w '%{time_total}' \
    "http://127.0.0.1:$engine/v1/chat/completions" -H 'content-type: application/json' -d "$2" \
    > "$work/$1.time"
}
metric() { curl -sf "http://127.0.0.1:$engine/metrics" | awk -v m="$1" 'index($0, m "{") == 1 {print $2}'; }

body='{"model":"demo","stream":true,"max_tokens":40,"messages":[{"role":"user","content":"hi"}]}'
asks=()
for i in 1 2 3 4; do
  ask "s$i" "$body" &
  asks+=($!)
done
# (curl processes start slowly on a loaded machine: until all four are in)
for _ in $(seq 40); do
  running=$(metric vllm:num_requests_running)
  waiting=$(metric vllm:num_requests_waiting)
  [[ ${running%%.*} == 2 && ${waiting%%.*} == 2 ]] && break
  sleep 0.02
done
[[ ${running%%.*} == 2 && ${waiting%%.*} == 2 ]] || fail "2 slots, 4 streams: running $running, waiting $waiting"
wait "${asks[@]}"
for i in 1 2 3 4; do grep -q '\[DONE\]' "$work/s$i.body" || fail "stream $i did not finish"; done
[[ $(metric vllm:num_requests_running) == 0.000000 ]] || fail "sequences still running after the streams ended"

# 40 tokens at 20 ms a step: a stream takes 0.8 s; the two that
# waited for a slot took about twice as long.
first=$(sort -n "$work"/s*.time | head -1) last=$(sort -n "$work"/s*.time | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b > a + 0.3) }' ||
  fail "the waiting streams ended as early as the running ones ($first s, $last s)"

history=$(printf '{"role":"user","content":"%s"}' "$(head -c 4000 /dev/zero | tr '\0' 'a')")
cached() {  # BODY: the cached tokens a non-streamed answer reports
  curl -sf "http://127.0.0.1:$engine/v1/chat/completions" -H 'content-type: application/json' -d "$1" |
    grep -o '"cached_tokens":[0-9]*' | cut -d: -f2
}
turn1='{"model":"demo","max_tokens":2,"messages":['"$history"']}'
turn2='{"model":"demo","max_tokens":2,"messages":['"$history"',{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}'
[[ $(cached "$turn1") == 0 ]] || fail "a first prompt found something cached"
hit=$(cached "$turn2")
((hit >= 900)) || fail "the second turn found $hit of its ~1,000 history tokens cached"
other='{"model":"demo","max_tokens":2,"messages":[{"role":"user","content":"'"$(head -c 4000 /dev/zero | tr '\0' 'b')"'"}]}'
[[ $(cached "$other") == 0 ]] || fail "an unrelated prompt found something cached"
hits=$(metric vllm:prefix_cache_hits_total)
awk -v h="$hits" 'BEGIN { exit !(h >= 900) }' || fail "prefix_cache_hits_total is $hits"
echo "cli_demo_engine_batching: 1 passed, 0 failed"
