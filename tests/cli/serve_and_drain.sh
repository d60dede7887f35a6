#!/usr/bin/env bash
# Black-box test of the real binary: `bench --help` shows the options;
# `check` accepts a good file and rejects a bad one with file:line:column;
# `serve` starts on ephemeral ports, streams through the built-in demo
# engine, and drains and exits 0 on SIGTERM while a stream is still running
# (the stream completes).
set -euo pipefail
bin=$1
work=$(mktemp -d)
server_pid="" engine_pid=""
# (The engine too: a failing run left it behind, still serving, an hour later.)
cleanup() {
  for p in $server_pid $engine_pid; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "--- server log"; cat "$work/log" 2>/dev/null || true; echo "FAIL: $*"; exit 1; }  # (the reason last: see shell_lib.sh)

cat > "$work/good.yaml" <<YAML
log_level: info
drain_timeout: 10s
listeners:
  - {name: main, address: 127.0.0.1, port: 0, upstream: demo}
upstreams:
  demo: {base_url: "http://127.0.0.1:0/v1"}
admin: {address: 127.0.0.1, port: 0}
demo_engine: {address: 127.0.0.1, port: 0, decode_tokens_per_second: 20}
YAML
grep -q ": ok" <<<"$("$bin" check -c "$work/good.yaml")" || fail "check rejected a good file"

printf 'upstreams:\n  a: {base_url: "http://x/v1"}\nlisteners:\n  - name: main\n    prot: 80\n' > "$work/bad.yaml"
if "$bin" check -c "$work/bad.yaml" > "$work/check.out" 2>&1; then fail "check accepted a bad file"; fi
grep -q "bad.yaml:5:5: unknown key 'prot'" "$work/check.out" || fail "check message: $(cat "$work/check.out")"

# `bench --help` shows the options (it used to ask for the value of --help).
"$bin" bench --help > "$work/help.out" 2>&1 || fail "bench --help exited $?: $(cat "$work/help.out")"
grep -q -- "--ramp-up SECONDS" "$work/help.out" || fail "bench --help: $(cat "$work/help.out")"

# A bench run that measured nothing fails, naming the error (port 1: refused).
if "$bin" bench --url http://127.0.0.1:1/v1 --requests 2 > "$work/bench.out" 2>&1; then fail "bench exited 0 with no request answered"; fi
grep -q "connect: Connection refused" "$work/bench.out" || fail "bench error detail: $(cat "$work/bench.out")"
grep -q "no request succeeded" "$work/bench.out" || fail "bench failure message: $(cat "$work/bench.out")"

# The demo engine's port is only known once it runs: start it alone first.
"$bin" demo-engine --port 0 --decode-tps 20 > "$work/engine.log" 2>&1 &
engine_pid=$!
for _ in $(seq 100); do grep -q '^PORT ' "$work/engine.log" && break; sleep 0.05; done
engine_port=$(awk '/^PORT /{print $2}' "$work/engine.log")
[[ -n $engine_port ]] || fail "demo engine did not report its port"
sed -i "s|127.0.0.1:0/v1|127.0.0.1:$engine_port/v1|; /^demo_engine/d" "$work/good.yaml"

"$bin" serve -c "$work/good.yaml" > "$work/log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do grep -q "metrics at" "$work/log" && break; sleep 0.05; done
port=$(grep -o "listening on http://127.0.0.1:[0-9]*" "$work/log" | head -1 | grep -o '[0-9]*$')
admin=$(grep -o "metrics at http://127.0.0.1:[0-9]*" "$work/log" | grep -o '[0-9]*$')
[[ -n $port && -n $admin ]] || fail "proxy did not start"
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz") == 200 ]] || fail "not ready after start"

body='{"model":"demo","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}'
curl -sN "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' -d "$body" > "$work/stream.out" &
curl_pid=$!
# Wait for the first token, so that the drain starts mid-stream (10 tokens
# at 20/s take 0.5 s).
for _ in $(seq 200); do grep -q '"content":"The"' "$work/stream.out" 2>/dev/null && break; sleep 0.01; done
grep -q '"content":"The"' "$work/stream.out" || fail "no first token"
kill -TERM "$server_pid"
sleep 0.1
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz") == 503 ]] || fail "still ready while draining"
wait "$curl_pid" || fail "curl failed during drain"
grep -q 'data: \[DONE\]' "$work/stream.out" || fail "stream was cut by the drain: $(cat "$work/stream.out")"
wait "$server_pid"; rc=$?
server_pid=""
[[ $rc -eq 0 ]] || fail "serve exited $rc after SIGTERM"
grep -q "draining" "$work/log" || fail "no drain in the log"
kill -TERM "$engine_pid"; wait "$engine_pid" || true
echo "cli_serve_and_drain: 1 passed, 0 failed"
