# Shared by the shell tests: a scratch folder, failure reporting, and
# starting the real binary on a config whose ports are rewritten to 0.
work=$(mktemp -d)
server_pid=""
pids=()  # other processes a test starts (start_demo_engine adds to it), killed at exit
cleanup() {
  for p in "${pids[@]}" $server_pid; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# The reason comes last, after the server log: CI shows the tail of a
# failed test's output, and a burst's access log can fill it.
fail() {
  [[ -f $work/log ]] && { echo "--- server log"; cat "$work/log"; echo "--- end of server log"; }
  echo "FAIL: $*"
  exit 1
}

# start_server CONFIG [COMMAND PREFIX...]: runs `tokengate serve -c CONFIG`
# (optionally under a prefix such as setpriv) and sets $port and $admin.
start_server() {
  local config=$1; shift
  "$@" "$bin" serve -c "$config" > "$work/log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do grep -q "metrics at" "$work/log" && break; sleep 0.05; done
  # (|| true: with pipefail a missing line would end the script before
  # `fail` could show the log.)
  port=$(sed -n 's|.*info tokengate .* listening on https*://[0-9.]*:\([0-9]*\)/v1 .*|\1|p' "$work/log" | head -1)
  admin=$(grep -o "metrics at http://[0-9.]*:[0-9]*" "$work/log" | grep -o '[0-9]*$' || true)
  [[ -n $port && -n $admin ]] || fail "tokengate did not start on $config"
}

# start_demo_engine [ARGS...]: `tokengate demo-engine` on an ephemeral port
# (ARGS such as --decode-tps 20); sets $engine to its port.
start_demo_engine() {
  "$bin" demo-engine --port 0 "$@" > "$work/engine.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do grep -q '^PORT ' "$work/engine.log" && break; sleep 0.05; done
  engine=$(awk '/^PORT /{print $2}' "$work/engine.log")
  [[ -n $engine ]] || fail "demo engine did not start"
}

# metrics_match GREP-ARGS...: whether the admin /metrics page matches.
# The page is read whole first: with pipefail, `curl | grep -q` fails when
# grep stops at its match while curl is still writing (SIGPIPE), which a
# loaded machine turns into a flaky test.
metrics_match() {
  local page
  page=$(curl -sf "http://127.0.0.1:$admin/metrics") || return 1
  grep -q "$@" <<<"$page"
}

stop_server() {
  kill -TERM "$server_pid"
  local rc=0
  wait "$server_pid" || rc=$?
  server_pid=""
  [[ $rc -eq 0 ]] || fail "serve exited $rc after SIGTERM"
}

# Every port in a config to 0 (ephemeral), so tests never collide; but the
# in-process demo engine's port is named in an upstream's base_url too, so it
# moves to a random high port instead.
ephemeral_ports() {
  # Below the kernel's ephemeral range (32768 and up by default): a test
  # running alongside (10,000 idle connections) can hold any port in it.
  local demo=$((10000 + RANDOM % 22000))
  sed -E "/port: 9901/! s/^( *)port: [0-9]+/\1port: 0/; s/9901/$demo/" "$1"
}

# start_redis_server: Debian's redis-server (scripts/setup installs it) on
# a free port, no persistence; sets $redis_port and $redis_pid.
# start_redis starts it again on the same port.
start_redis() {
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    > "$work/redis.log" 2>&1 &
  redis_pid=$!
  pids+=("$redis_pid")
  for _ in $(seq 100); do grep -q "Ready to accept" "$work/redis.log" && return 0; sleep 0.05; done
  return 1
}
start_redis_server() {
  command -v redis-server > /dev/null || fail "redis-server is missing (scripts/setup installs it)"
  for _ in 1 2 3 4 5; do
    redis_port=$((20000 + RANDOM % 12000))
    start_redis && return 0
    kill -9 "$redis_pid" 2> /dev/null || true
  done
  fail "redis-server did not start: $(cat "$work/redis.log")"
}

# start_demo_fleet N [ARGS...]: N demo engines (ARGS as start_demo_engine
# takes them); their ports in $engines, their logs engine1.log ….
start_demo_fleet() {
  local n=$1
  shift
  engines=()
  for i in $(seq "$n"); do
    start_demo_engine "$@"
    engines+=("$engine")
    mv "$work/engine.log" "$work/engine$i.log"
  done
}

# fleet_upstreams [LINE...]: the engines as upstreams e1 … eN of a
# config's `upstreams:`, each with the given lines (e.g. "capacity: {…}").
fleet_upstreams() {
  local i line
  for i in "${!engines[@]}"; do
    printf '  e%d:\n    base_url: "http://127.0.0.1:%s/v1"\n' $((i + 1)) "${engines[$i]}"
    for line in "$@"; do printf '    %s\n' "$line"; done
  done
}
