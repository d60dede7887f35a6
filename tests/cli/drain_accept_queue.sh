#!/usr/bin/env bash
# A drain serves the connections still waiting in the listener's accept
# queue: closing a listener makes the kernel reset every connection queued
# on it, so in a binary upgrade (docs/operations.md) the clients that
# connected just before the old process's SIGTERM got a reset, not an
# answer. Here the process is stopped (SIGSTOP) while 60 clients connect
# and send their requests (the kernel completes the connections and queues
# them), then gets SIGTERM and SIGCONT: every client must get its 200.
set -euo pipefail
bin=$(readlink -f "$1")
source "$(dirname "$0")/../support/shell_lib.sh"
start_demo_engine
cat > "$work/config.yaml" <<YAML
workers: 1
drain_timeout: 10s
listeners: [{name: main, address: 127.0.0.1, port: 0, upstream: demo}]
upstreams: {demo: {base_url: "http://127.0.0.1:$engine/v1"}}
admin: {address: 127.0.0.1, port: 0}
YAML
start_server "$work/config.yaml"
pids+=("$server_pid")

kill -STOP "$server_pid"
clients=()
for i in $(seq 60); do
  curl -s -o /dev/null -w '%{http_code}\n' --max-time 20 "http://127.0.0.1:$port/v1/chat/completions" \
    -d '{"model":"demo","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}' > "$work/code.$i" 2>&1 &
  clients+=($!)
done
# Every connection completed by the kernel and queued (the listener's
# backlog counts them: ss shows Recv-Q on a listening socket).
for _ in $(seq 100); do
  queued=$(ss -ltnH "( sport = :$port )" | awk '{print $2}')
  [[ ${queued:-0} -ge 60 ]] && break
  sleep 0.05
done
[[ ${queued:-0} -ge 60 ]] || fail "only ${queued:-0} of 60 connections queued"
kill -TERM "$server_pid"
kill -CONT "$server_pid"
for c in "${clients[@]}"; do wait "$c" || true; done
answered=$(cat "$work"/code.* | grep -c '^200$' || true)
[[ $answered -eq 60 ]] || fail "$answered of the 60 queued requests answered 200; the others: $(cat "$work"/code.* | sort | uniq -c | tr '\n' ' ')"
rc=0; wait "$server_pid" || rc=$?
server_pid=""
[[ $rc -eq 0 ]] || fail "serve exited $rc after the drain"
