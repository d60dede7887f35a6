#!/usr/bin/env bash
# Black-box reload of what a listener is bound to. A config without routes
# sends each listener's requests to the listener's upstream: a reload that
# renames that upstream must be followed (before, every request after it
# got an empty reply); a reload that would leave the bound listener with no
# upstream at all is refused and the running policy stays; a reload that
# changes what is read only at start (limits here) says so in the log; the
# log level follows a reload (the access log off at warn, on at info).
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"
start_demo_engine

# write_config LISTENER_NAME UPSTREAM_NAME [MORE YAML]
# The new file keeps the old one's modification time, so only the SIGHUP
# below reloads it: the server's file watcher (which reloads on a changed
# time) would otherwise race the test's log and metric counts.
write_config() {
  write_yaml "$@" > "$work/cfg.yaml.next"
  [[ -e $work/cfg.yaml ]] && touch -r "$work/cfg.yaml" "$work/cfg.yaml.next"
  mv "$work/cfg.yaml.next" "$work/cfg.yaml"
}
write_yaml() {
  cat <<YAML
listeners: [{name: $1, address: 127.0.0.1, port: 0, upstream: $2}]
upstreams:
  $2: {base_url: "http://127.0.0.1:$engine/v1"}
admin: {address: 127.0.0.1, port: 0}
${3:-}
YAML
}
# reload_and_wait TEXT: SIGHUP, then until the log has TEXT once more than before.
reload_and_wait() {
  local before
  before=$(grep -c "$1" "$work/log" || true)
  kill -HUP "$server_pid"
  for _ in $(seq 100); do (($(grep -c "$1" "$work/log" || true) > before)) && return; sleep 0.05; done
  fail "no '$1' in the log after SIGHUP"
}
answered() {
  local status
  rm -f "$work/answer"
  status=$(curl -s -o "$work/answer" -w '%{http_code}' -m 5 "http://127.0.0.1:$port/v1/chat/completions" \
    -H 'content-type: application/json' -d '{"model":"demo","max_tokens":1,"messages":[]}' || true)
  [[ $status == 200 ]] || fail "$1: status '$status', body: $(cat "$work/answer" 2> /dev/null)"
}

write_config main first
start_server "$work/cfg.yaml"
answered "before any reload"

write_config main second
reload_and_wait "is in effect"
answered "after the listener's upstream was renamed"
grep -q "only after a restart" "$work/log" && fail "renaming the listener's upstream needs no restart"

write_config other third
reload_and_wait "reload refused"
grep -q "reload refused.*listener 'main' stays bound.*'first'" "$work/log" ||
  fail "the refusal does not name the bound listener and its upstream"
metrics_match 'tokengate_config_reloads_total{result="failure"} 1$' || fail "the refused reload was not counted"
answered "after the refused reload"

write_config main second "limits: {max_body_bytes: 1000000}"
reload_and_wait "only after a restart: limits"
answered "after a reload of the limits"

# The log level follows a reload: at warn, no access log line (info).
access_lines() { grep -c ' info access ' "$work/log" || true; }
write_config main second "limits: {max_body_bytes: 1000000}
log_level: warn"
reload_and_wait "log level warn from now on"
before=$(access_lines)
answered "at log level warn"
sleep 0.2
(($(access_lines) == before)) || fail "an access log line at log level warn"
write_config main second "limits: {max_body_bytes: 1000000}
log_level: info"
reload_and_wait "log level info from now on"
answered "back at log level info"
for _ in $(seq 40); do (($(access_lines) > before)) && break; sleep 0.05; done
(($(access_lines) > before)) || fail "no access log line back at log level info"

stop_server
echo "cli_reload_listener: 1 passed, 0 failed"
