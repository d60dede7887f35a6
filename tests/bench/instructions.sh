#!/usr/bin/env bash
# Instructions and heap allocations per request, counted rather than timed:
# tokengate runs under valgrind (callgrind, then heaptrack) in front of the
# demo engine, and `tokengate bench` sends REQUESTS streaming requests after a
# warm-up of 200. Counts do not move with the load of a shared machine, so a
# change of a few percent in user-space work shows here when ab_cpu.sh's
# timings cannot see it. They say nothing of the kernel's share (three
# quarters of the CPU on a relay) nor of cache misses. On demand, not a
# test; needs valgrind and heaptrack (Debian packages of those names).
# Allocations are only counted on glibc's heap: mimalloc's operator new
# goes around heaptrack's hooks, so for a release binary (mimalloc) build
# one with `cmake -DTOKENGATE_MIMALLOC=OFF` to count them.
# KEEP_CALLGRIND=FILE keeps callgrind's output there, for callgrind_annotate.
# API=anthropic sends Anthropic requests (/v1/messages) instead of OpenAI ones;
# DEMO adds demo knobs (tool-call streams: DEMO='"tool_call":true'), BODY members of
# the request body (usage in every chunk, as vLLM sends it when asked:
# BODY='"stream_options":{"include_usage":true,"continuous_usage_stats":true}'); SDK_HEADERS=1 sends
# the OpenAI Python SDK's header fields (bench_lib.sh). CACHE_MISS=1 puts a
# response cache on the route and sends `Cache-Control: no-cache`: every
# request asked upstream and its answer kept, as a miss's is.
# Usage: tests/bench/instructions.sh TOKENGATE_BIN [REQUESTS] [TOKENS] [PROMPT_TOKENS] [CONCURRENCY]
# ENGINE_BIN runs the demo engine (and the load) of another build, for a
# binary older than a knob: ENGINE_BIN=build/tokengate instructions.sh OLD ...
#   short requests: instructions.sh build/tokengate 2000 20 20 4
#   long prompts:   instructions.sh build/tokengate 400 20 50000 8
#   fast streams (scenario 2's shape): instructions.sh build/tokengate 300 256 20 64
set -euo pipefail
bin=$1 requests=${2:-2000} tokens=${3:-20} prompt=${4:-20} concurrency=${5:-4}
if [[ -n ${CACHE_MISS:-} ]]; then export ROUTE_EXTRA=", cache: {ttl: 10m, mode: always}"; fi
source "$(dirname "$0")/bench_lib.sh"  # sets $work and $pids, both cleaned up on exit
if [[ -n ${CACHE_MISS:-} ]]; then sdk_extra+=(--header "Cache-Control: no-cache"); fi

engine=$(free_port)
"${ENGINE_BIN:-$bin}" demo-engine --port "$engine" > "$work/engine.log" 2>&1 &
pids+=($!)
load() {  # $1: requests, $2: port
  "${ENGINE_BIN:-$bin}" bench --url "http://127.0.0.1:$2/v1" --model bench --requests "$1" --concurrency "$concurrency" ${API:+--api "$API"} \
    --max-tokens "$tokens" --prompt-tokens "$prompt" --json "${sdk_extra[@]}" \
    --extra-body "{\"demo\":{\"ttft_ms\":0,\"interval_ms\":0,\"tokens\":$tokens${DEMO:+,$DEMO}}${BODY:+,$BODY}}" > "$work/r.json"
}
# run_under TOOL...: the proxy under a tool, the warm-up and the load, then
# an orderly stop (SIGINT), so that the tool writes its results.
run_under() {
  local port; port=$(free_port)
  tokengate_config "$work/cfg.yaml" "$port" "$engine"
  "$@" "$bin" serve -c "$work/cfg.yaml" > "$work/proxy.log" 2>&1 &
  local served=$!
  wait_listening "$work/proxy.log" 30  # (valgrind starts slowly)
  load 200 "$port"
  load "$requests" "$port"
  pkill -INT -f "serve -c $work/cfg.yaml" || true
  wait "$served" || true
}
total=$((requests + 200))
run_under valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out"
[[ -n ${KEEP_CALLGRIND:-} ]] && cp "$work/callgrind.out" "$KEEP_CALLGRIND"
instructions=$(callgrind_annotate "$work/callgrind.out" 2> /dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
on_mimalloc=false
"$bin" version | grep -q "heap: mimalloc" && on_mimalloc=true
if ! $on_mimalloc; then
  run_under heaptrack -o "$work/heap"
  allocations=$(heaptrack_print -f "$work"/heap* 2> /dev/null | awk '/^calls to allocation functions:/ {print $5}')
fi
echo "$total requests of $tokens tokens, prompts of $prompt tokens, $concurrency at a time (warm-up and start-up included):"
if $on_mimalloc; then
  python3 -c "print(f'  {$instructions / $total:,.0f} instructions per request (heap allocations: not seen under mimalloc, see above)')"
else
  python3 -c "print(f'  {$instructions / $total:,.0f} instructions per request, {$allocations / $total:.1f} heap allocations per request')"
fi
