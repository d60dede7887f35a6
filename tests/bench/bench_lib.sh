# Shared by the on-demand bench scripts (sourced): tokengate in front of a
# demo engine with the benchmark's policy on (routing by model, a max-token
# clamp, full accounting), one worker, no access log.

# A scratch directory ($work) and the processes started ($pids, to which
# each script adds), removed and stopped when the script exits.
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# The script and what it runs to sample (sleep, curl, python3, /proc reads)
# stay on the load's core, 1; the proxy under test is started on core 0 by
# name. Left free, the sampling ran on the proxy's core and took its turn:
# relay_delay.sh's loop ran 300 ms of every 4 s there (perf sched), and
# the proxy waited up to 28 ms for it.
taskset -cp 1 $$ > /dev/null

# tokengate_config FILE PORT ENGINE_PORT (POOL_SIZE: the upstream pool's
# size, 256 unless set; 256 idle connections hold about 5 MB after a burst)
tokengate_config() {
  cat > "$1" <<YAML
log_level: warn
workers: 1
listeners: [{name: main, address: 127.0.0.1, port: $2}]
upstreams: {source: {base_url: "http://127.0.0.1:$3/v1", pool_size: ${POOL_SIZE:-256}}}
routes:
  - {name: bench, models: [bench], targets: [{upstream: source, model: demo}],
     max_output_tokens: {default: 256, ceiling: 256, mode: clamp}}
YAML
}

# start_nginx PORT ENGINE_PORT: nginx from Debian's package as the reference
# (as compare.mjs runs it: one worker, no buffering either way, a keep-alive
# pool to the engine, no access log) on core 0; sets $proxy to its worker's
# pid (the master relays nothing) and adds the master to $pids.
start_nginx() {
  cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 20000; }
http {
  access_log off;
  upstream source { server 127.0.0.1:$2; keepalive 128; }
  server {
    listen 127.0.0.1:$1;
    location / { proxy_pass http://source; proxy_http_version 1.1; proxy_set_header Connection "";
                 proxy_buffering off; proxy_request_buffering off; client_body_buffer_size 8m; client_max_body_size 16m; }
  }
}
CONF
  taskset -c 0 /usr/sbin/nginx -c "$work/nginx.conf" -g "daemon off;" &
  pids+=($!)
  sleep 0.5
  proxy=$(pgrep -P "${pids[-1]}" | head -1)
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

# The header fields the OpenAI Python SDK sends besides the framing ones
# (its versions, made-up key), as `tokengate bench` arguments: what a proxy
# parses per request from real clients. instructions.sh and ab_cpu.sh add
# them with SDK_HEADERS=1 (sdk_extra holds them then, else nothing).
sdk_header_args=(--header "Accept-Encoding: gzip, deflate" --header "Connection: keep-alive"
  --header "User-Agent: OpenAI/Python 1.54.4" --header "X-Stainless-Lang: python"
  --header "X-Stainless-Package-Version: 1.54.4" --header "X-Stainless-OS: Linux" --header "X-Stainless-Arch: x64"
  --header "X-Stainless-Runtime: CPython" --header "X-Stainless-Runtime-Version: 3.12.7"
  --header "Authorization: Bearer sk-demo-0123456789abcdefghijklmnopqrstuvwxyz0123456789AB"
  --header "X-Stainless-Async: false" --header "x-stainless-retry-count: 0" --header "x-stainless-read-timeout: 600")
sdk_extra=()
if [[ -n ${SDK_HEADERS:-} ]]; then sdk_extra=("${sdk_header_args[@]}"); fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_engine BIN PORT: the demo engine, the source of every load, on core 1
# (beside the load, away from the proxy under test).
start_engine() {
  taskset -c 1 "$1" demo-engine --port "$2" > "$work/engine.log" 2>&1 &
  pids+=($!)
}

# start_proxy tokengate|nginx BIN PORT ENGINE_PORT: one proxy in front of
# the engine, for the scripts that measure either; sets $proxy (adding it to
# $pids) and $model (the model name that proxy routes). PRELOAD=/path/lib.so
# runs tokengate on another heap (LD_PRELOAD); TOKENGATE_YAML adds lines to
# its config (e.g. "memory: {after_burst: keep}").
start_proxy() {
  if [[ $1 == nginx ]]; then
    start_nginx "$3" "$4"
    model=demo
  else
    tokengate_config "$work/cfg.yaml" "$3" "$4"
    [[ -z ${TOKENGATE_YAML:-} ]] || echo "$TOKENGATE_YAML" >> "$work/cfg.yaml"
    LD_PRELOAD=${PRELOAD:-} start_tokengate "$2" "$work/cfg.yaml" "$work/proxy.log"
    pids+=($proxy)
    model=bench
  fi
}
