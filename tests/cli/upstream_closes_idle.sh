#!/usr/bin/env bash
# A pooled upstream connection that its upstream closes while it waits (an
# engine's keep-alive timeout: uvicorn's is 5 s) is closed on the proxy's
# side within about a second, and not left in CLOSE_WAIT, and counted as
# pooled, until a request would take it. The upstream is a second
# tokengate whose idle_timeout (its wait for a client's next request) is
# 1 s, in front of the demo engine.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"

start_demo_engine
cat > "$work/inner.yaml" <<YAML
log_level: info
listeners: [{name: main, address: 127.0.0.1, port: 0}]
admin: {address: 127.0.0.1, port: 0}
limits: {idle_timeout: 1s}
upstreams: {engine: {base_url: "http://127.0.0.1:$engine/v1"}}
routes: [{name: all, models: [demo], targets: [{upstream: engine}]}]
YAML
start_server "$work/inner.yaml"
inner=$port
pids+=("$server_pid")
server_pid=""
mv "$work/log" "$work/inner.log"

cat > "$work/outer.yaml" <<YAML
log_level: info
listeners: [{name: main, address: 127.0.0.1, port: 0}]
admin: {address: 127.0.0.1, port: 0}
upstreams: {inner: {base_url: "http://127.0.0.1:$inner/v1"}}
routes: [{name: all, models: [demo], targets: [{upstream: inner}]}]
YAML
start_server "$work/outer.yaml"

status=$(curl -s -o "$work/answer" -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
  -H 'content-type: application/json' -d '{"model":"demo","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}')
[[ $status == 200 ]] || fail "the request through both proxies answered $status: $(cat "$work/answer")"

# The outer proxy's sockets to the inner one in CLOSE_WAIT (state 08 in
# /proc/net/tcp, whose ports are in hex), as `ss` would list them.
close_waits() {
  local hex
  hex=$(printf '%04X' "$inner")
  awk -v port=":$hex" '$3 ~ port"$" && $4 == "08"' /proc/net/tcp | wc -l
}

for _ in $(seq 40); do metrics_match '^tokengate_upstream_cx_idle 1$' && break; sleep 0.05; done
metrics_match '^tokengate_upstream_cx_idle 1$' || fail "the connection to the inner proxy was not pooled"

# The inner proxy closes it after 1 s; the outer's sweep runs once a second.
start=$(date +%s%N)
for _ in $(seq 100); do metrics_match '^tokengate_upstream_cx_idle 0$' && break; sleep 0.05; done
waited_ms=$((($(date +%s%N) - start) / 1000000))
metrics_match '^tokengate_upstream_cx_idle 0$' ||
  fail "a pooled connection its upstream closed was still pooled after ${waited_ms} ms ($(close_waits) in CLOSE_WAIT)"
[[ $(close_waits) -eq 0 ]] || fail "$(close_waits) connection(s) to the inner proxy still in CLOSE_WAIT"

# And the next request is answered, on a new connection.
status=$(curl -s -o "$work/answer" -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
  -H 'content-type: application/json' -d '{"model":"demo","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}')
[[ $status == 200 ]] || fail "the request after the close answered $status: $(cat "$work/answer")"
stop_server
echo "ok: closed ${waited_ms} ms after the request (the upstream closes at 1 s)"
