#!/usr/bin/env bash
# Black-box: prompt caching across providers, with the real binary and the
# demo engine speaking Anthropic's Messages API.
#  - An OpenAI chat client's conversation on a route with
#    `prompt_cache: auto`: the engine receives breakpoints at the end of
#    the system prompt and of the user turns; the second turn reads what
#    the first wrote, which reaches the client as
#    prompt_tokens_details.cached_tokens (streamed and whole), the access
#    log and the metrics, and the key's budget is charged for it at the
#    cached price (and for what was written at the write price).
#  - The same conversation on a route without it: no breakpoint at all.
#  - An Anthropic client's own cache_control passes untouched: its second
#    identical request reads the cache.
#  - A Responses client's conversation on the `prompt_cache: auto` route:
#    the same breakpoints, and the second turn's read reaches it as
#    usage.input_tokens_details.cached_tokens.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"
start_demo_engine --prompt-cache-min-tokens 64

key=sk-prompt-cache
cat > "$work/config.yaml" <<YAML
log_level: info
listeners: [{name: main, address: 127.0.0.1, port: 0}]
upstreams: {claude: {base_url: "http://127.0.0.1:$engine/v1", kind: anthropic}}
routes:
  - {name: cached, models: [claude-cached], targets: [{upstream: claude}],
     prompt_cache: {mode: auto, min_tokens: 64}}
  - {name: plain, models: ["claude-*"], targets: [{upstream: claude}]}
keys: [{name: app, sha256: "$("$bin" hash-key <<< "$key")", budget: {usd_per_day: 100}}]
prices:
  "claude-*": {input_per_million: 3, output_per_million: 15,
               cached_input_per_million: 0.3, cache_write_per_million: 3.75}
admin: {address: 127.0.0.1, port: 0}
YAML
start_server "$work/config.yaml"

system=$(printf 'You answer questions about words, briefly and kindly. %.0s' $(seq 20))
knobs='x-demo: {"tokens":5,"ttft_ms":0,"interval_ms":0}'
post() { # PATH BODY: the answer's body
  curl -sf "http://127.0.0.1:$port$1" -H "authorization: Bearer $key" -H "$knobs" \
    -H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' -d "$2"
}
# The breakpoints of the request the engine received last, as paths.
breakpoints() {
  curl -sf "http://127.0.0.1:$engine/demo/stats" | jq -r '.last_request.body' |
    jq -c '[paths(objects and has("cache_control")) | map(tostring) | join(".")]'
}
turn1=$(jq -nc --arg s "$system" '{model: "claude-cached", messages: [
  {role: "system", content: $s}, {role: "user", content: "What does ephemeral mean?"}]}')
turn2=$(jq -c '.messages += [{role: "assistant", content: "Lasting a very short time."},
  {role: "user", content: "And transient?"}]' <<< "$turn1")

# 1. Turn one, streamed: the system prompt and the user turn are marked;
# nothing was cached before.
stream=$(post /v1/chat/completions "$(jq -c '. + {stream: true,
  stream_options: {include_usage: true}}' <<< "$turn1")") || fail "turn one failed"
[[ $(breakpoints) == '["system.0","messages.0.content.0"]' ]] ||
  fail "turn one's breakpoints: $(breakpoints)"
usage1=$(grep '"usage"' <<< "$stream" | tail -1 | sed 's/^data: //' | jq -c .usage)
[[ $(jq .prompt_tokens_details.cached_tokens <<< "$usage1") == 0 ]] || fail "turn one: $usage1"

# 2. Turn two, whole: the user turn before the final one is marked too,
# and what turn one wrote is read.
answer=$(post /v1/chat/completions "$turn2") || fail "turn two failed"
[[ $(breakpoints) == '["system.0","messages.0.content.0","messages.2.content.0"]' ]] ||
  fail "turn two's breakpoints: $(breakpoints)"
prompt1=$(jq .prompt_tokens <<< "$usage1")
cached2=$(jq .usage.prompt_tokens_details.cached_tokens <<< "$answer")
prompt2=$(jq .usage.prompt_tokens <<< "$answer")
# Turn one wrote its whole prompt but the +1 of the engine's count.
((cached2 == prompt1 - 1 && prompt2 > cached2)) ||
  fail "turn two read $cached2 of $prompt2 (turn one's prompt: $prompt1): $answer"

# 3. The access log: each turn's reads and writes; the budget charged them
# at their own prices (micro-dollars: 3 input, 0.3 read, 3.75 written, 15 output).
for _ in $(seq 40); do (($(grep -c ' info access ' "$work/log") >= 2)) && break; sleep 0.05; done
expected=0
while read -r line; do
  json=${line#* info access }
  read -r in out read written < <(jq -r '[.input_tokens, .output_tokens,
    (.cache_read_tokens // 0), (.cache_write_tokens // 0)] | @tsv' <<< "$json")
  expected=$(python3 -c "import math; print($expected + math.floor(($in - $read - $written) * 3 \
    + $read * 0.3 + $written * 3.75 + $out * 15 + 0.5))")
  echo "turn: input $in (read $read, written $written), output $out"
done < <(grep ' info access ' "$work/log")
grep ' info access ' "$work/log" | tail -1 | grep -q "\"cache_read_tokens\":$cached2," ||
  fail "the access log misses turn two's cache read"
spent() {
  curl -sf "http://127.0.0.1:$admin/budgets" |
    jq '.budgets[] | select(.limit == "usd_per_day") | .used * 1000000 | round'
}
for _ in $(seq 40); do (($(spent) == expected)) && break; sleep 0.05; done
used=$(spent)
((used == expected)) || fail "the budget charged $used micro-dollars, the usage makes $expected"
metrics_match "^tokengate_tokens_total{route=\"cached\".*type=\"cache_read\"} $cached2$" ||
  fail "no cache_read tokens in /metrics"

# 4. Without prompt_cache: the same conversation gets no breakpoint.
post /v1/chat/completions "$(jq -c '.model = "claude-plain"' <<< "$turn2")" > /dev/null ||
  fail "the plain route's request failed"
[[ $(breakpoints) == '[]' ]] || fail "breakpoints without prompt_cache: $(breakpoints)"

# 5. An Anthropic client's cache_control passes as it sent it, and its
# second identical request reads what its first wrote.
# (Another system prompt: the chat turns above cached theirs.)
messages=$(jq -nc --arg s "Anthropic's own. $system" '{model: "claude-plain", max_tokens: 50,
  system: [{type: "text", text: $s, cache_control: {type: "ephemeral"}}],
  messages: [{role: "user", content: "Hi"}]}')
first=$(post /v1/messages "$messages") || fail "the Anthropic request failed"
[[ $(curl -sf "http://127.0.0.1:$engine/demo/stats" | jq -r '.last_request.body' | jq -c .system) == \
  "$(jq -c .system <<< "$messages")" ]] || fail "the system blocks changed on the way"
second=$(post /v1/messages "$messages") || fail "the second Anthropic request failed"
written=$(jq .usage.cache_creation_input_tokens <<< "$first")
((written > 0)) || fail "nothing written: $first"
[[ $(jq .usage.cache_read_input_tokens <<< "$second") == "$written" &&
  $(jq .usage.cache_creation_input_tokens <<< "$second") == 0 ]] || fail "not read: $second"

# 6. A Responses client's conversation on the prompt_cache route: its
# instructions and user turns are marked as chat's are, and the second
# turn's read reaches it as input_tokens_details.cached_tokens (streamed:
# in response.completed; whole: in the response's usage).
rturn1=$(jq -nc --arg s "A Responses agent's own. $system" '{model: "claude-cached",
  instructions: $s, input: [{role: "user", content: "What does ephemeral mean?"}]}')
rturn2=$(jq -c '.input += [{role: "assistant", content: "Lasting a very short time."},
  {role: "user", content: "And transient?"}]' <<< "$rturn1")
rstream=$(post /v1/responses "$(jq -c '. + {stream: true}' <<< "$rturn1")") ||
  fail "the Responses turn one failed"
[[ $(breakpoints) == '["system.0","messages.0.content.0"]' ]] ||
  fail "the Responses turn one's breakpoints: $(breakpoints)"
rusage1=$(grep '^data: .*"type":"response.completed"' <<< "$rstream" | sed 's/^data: //' |
  jq -c .response.usage)
[[ $(jq .input_tokens_details.cached_tokens <<< "$rusage1") == 0 ]] ||
  fail "the Responses turn one: $rusage1"
ranswer=$(post /v1/responses "$rturn2") || fail "the Responses turn two failed"
[[ $(breakpoints) == '["system.0","messages.0.content.0","messages.2.content.0"]' ]] ||
  fail "the Responses turn two's breakpoints: $(breakpoints)"
rinput1=$(jq .input_tokens <<< "$rusage1")
rcached2=$(jq .usage.input_tokens_details.cached_tokens <<< "$ranswer")
((rcached2 == rinput1 - 1 && $(jq .usage.input_tokens <<< "$ranswer") > rcached2)) ||
  fail "the Responses turn two read $rcached2 (turn one's input: $rinput1): $ranswer"
stop_server
echo "cli_prompt_cache: turn two read $cached2 of $prompt2 prompt tokens; charged $used micro-USD;" \
  "the Responses turn two read $rcached2"
