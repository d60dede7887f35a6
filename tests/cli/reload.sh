#!/usr/bin/env bash
# Black-box reload: SIGHUP with a bad file is refused (file:line:column in the
# log, the running policy stays, the failure is counted); SIGHUP with a good
# file takes effect; so does a plain change of the file.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"

"$bin" demo-engine --port 0 > "$work/engine.log" 2>&1 &
engine_pid=$!
disown "$engine_pid"  # (killed at exit; no job-control notice)
trap 'kill -9 "$engine_pid" 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 100); do grep -q '^PORT ' "$work/engine.log" && break; sleep 0.05; done
engine=$(awk '/^PORT /{print $2}' "$work/engine.log")
[[ -n $engine ]] || fail "demo engine did not start"

write_config() {  # $1: the model name the route sends upstream
  cat > "$work/cfg.yaml" <<YAML
listeners: [{name: main, address: 127.0.0.1, port: 0}]
upstreams:
  demo: {base_url: "http://127.0.0.1:$engine/v1"}
routes:
  - {models: [m], targets: [{upstream: demo, model: $1}]}
admin: {address: 127.0.0.1, port: 0}
YAML
}
write_config first
start_server "$work/cfg.yaml"

upstream_model() {
  curl -sf "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' \
    -d '{"model":"m","max_tokens":1}' > /dev/null || fail "request failed"
  curl -sf "http://127.0.0.1:$engine/demo/stats" |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(JSON.parse(s).last_request.body).model))'
}
[[ $(upstream_model) == first ]] || fail "initial policy not applied"

printf 'listeners: [{name: main, port: 0}]\nupstreams:\n  demo: {base_url: "http://x/v1", colour: blue}\n' > "$work/cfg.yaml"
kill -HUP "$server_pid"
for _ in $(seq 100); do grep -q "reload refused" "$work/log" && break; sleep 0.05; done
grep -q "reload refused.*cfg.yaml:3:[0-9]*: unknown key 'colour'" "$work/log" || fail "bad reload not reported with its position"
[[ $(upstream_model) == first ]] || fail "a bad file replaced the running policy"
metrics_match 'tokengate_config_reloads_total{result="failure"} [1-9]' || fail "failed reload not counted"

sleep 1.1  # a new modification time for the watcher to see
write_config second
kill -HUP "$server_pid"
for _ in $(seq 100); do [[ $(upstream_model) == second ]] && break; sleep 0.05; done
[[ $(upstream_model) == second ]] || fail "SIGHUP did not apply the good file"

sleep 1.1
write_config third   # no signal: the file watcher must notice
for _ in $(seq 60); do [[ $(upstream_model) == third ]] && break; sleep 0.1; done
[[ $(upstream_model) == third ]] || fail "a change of the file was not picked up"

stop_server
echo "cli_reload: 1 passed, 0 failed"
