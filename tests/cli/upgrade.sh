#!/usr/bin/env bash
# A binary upgrade without a gap (docs/operations.md): a second tokengate
# starts on the same ports as a running one (SO_REUSEPORT on every
# listener, and a warning in its log that it shares them), then the old
# one gets SIGTERM. The old one's stream in flight finishes, and every
# request sent meanwhile is answered (by the new one).
set -euo pipefail
bin=$(readlink -f "$1")
source "$(dirname "$0")/../support/shell_lib.sh"
start_demo_engine --decode-tps 20

write_config() {  # PORT ADMIN_PORT
  cat <<YAML
drain_timeout: 10s
listeners: [{name: main, address: 127.0.0.1, port: $1, upstream: demo}]
upstreams: {demo: {base_url: "http://127.0.0.1:$engine/v1"}}
admin: {address: 127.0.0.1, port: $2}
YAML
}
write_config 0 0 > "$work/old.yaml"
start_server "$work/old.yaml"
old_pid=$server_pid; pids+=("$old_pid"); mv "$work/log" "$work/old.log"
write_config "$port" "$admin" > "$work/new.yaml"
start_server "$work/new.yaml"
new_pid=$server_pid; pids+=("$new_pid")
grep -q "listening on http://127.0.0.1:$port/" "$work/log" || fail "the new process did not share port $port"
# Sharing a port is said, so that a second process started by mistake is
# seen: by the new process, for both ports, and not by the old one.
grep -q "127.0.0.1:$port (listener 'main') is already open in another process" "$work/log" ||
  fail "the new process did not say it shares port $port: $(cat "$work/log")"
grep -q "127.0.0.1:$admin (admin: .*) is already open in another process" "$work/log" ||
  fail "the new process did not say it shares admin port $admin"
! grep -q "already open in another process" "$work/old.log" || fail "the first process said it shares a port"

body='{"model":"demo","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}'
# A stream on the old process (send until one lands there: the kernel spreads
# connections between the two).
for attempt in $(seq 20); do
  curl -sN "http://127.0.0.1:$port/v1/chat/completions" -d "$body" > "$work/stream.out" &
  curl_pid=$!
  sleep 0.2
  # The two processes share the admin port too, so ask the kernel which one
  # holds the connection.
  if grep -q "pid=$old_pid," <<<"$(ss -tnp state established "( sport = :$port )")"; then break; fi
  wait "$curl_pid"
  curl_pid=""
done
[[ -n ${curl_pid:-} ]] || fail "no stream landed on the old process in 20 tries"

kill -TERM "$old_pid"
# While the old process drains, new requests are all answered.
for i in $(seq 20); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
    -d '{"model":"demo","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}')
  [[ $code == 200 ]] || fail "request $i during the old process's drain got $code"
done
wait "$curl_pid" || fail "the old process's stream failed"
grep -q 'data: \[DONE\]' "$work/stream.out" || fail "the old process's stream was cut: $(cat "$work/stream.out")"
rc=0; wait "$old_pid" || rc=$?
[[ $rc -eq 0 ]] || fail "the old process exited $rc"
stop_server
echo "cli_upgrade: passed"
