# Shared by the on-demand bench scripts (sourced): tokengate in front of a
# demo engine with the benchmark's policy on (routing by model, a max-token
# clamp, full accounting), one worker, no access log.

# A scratch directory ($work) and the processes started ($pids, to which
# each script adds), removed and stopped when the script exits.
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# tokengate_config FILE PORT ENGINE_PORT
tokengate_config() {
  cat > "$1" <<YAML
log_level: warn
workers: 1
listeners: [{name: main, address: 127.0.0.1, port: $2}]
upstreams: {source: {base_url: "http://127.0.0.1:$3/v1", pool_size: 256}}
routes:
  - {name: bench, models: [bench], targets: [{upstream: source, model: demo}],
     max_output_tokens: {default: 256, ceiling: 256, mode: clamp}}
YAML
}

# wait_listening LOG [SECONDS]: until tokengate's log says it listens.
wait_listening() {
  for _ in $(seq $((${2:-5} * 20))); do grep -q "Send requests" "$1" && return; sleep 0.05; done
}

# start_tokengate BIN CONFIG LOG: starts it on core 0, waits until it listens,
# and sets $proxy to its pid.
start_tokengate() {
  taskset -c 0 "$1" serve -c "$2" > "$3" 2>&1 &
  proxy=$!
  wait_listening "$3"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
