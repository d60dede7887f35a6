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

# TLS=1: both proxies terminate TLS (TLS 1.3, a P-256 certificate made
# here for localhost), as in production; the load connects with https and
# trusts that certificate (SSL_CERT_FILE, exported). $scheme and $host are
# what the load's URL takes.
# TLS_UPSTREAM=1: the source is reached over TLS too, as a hosted provider
# is: start_engine puts a TLS terminator (tokengate, on the load's core) in
# front of the demo engine, on the port the caller gave the engine; both
# proxies keep their connections to it alive (nginx also reuses sessions).
scheme=http host=127.0.0.1 tokengate_tls="" nginx_tls="" upstream_scheme=http upstream_tls="" nginx_upstream_tls=""
if [[ -n ${TLS:-}${TLS_UPSTREAM:-} ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$work/key.pem" -out "$work/cert.pem" 2> /dev/null
  export SSL_CERT_FILE=$work/cert.pem
fi
if [[ -n ${TLS:-} ]]; then
  scheme=https host=localhost
  tokengate_tls=", tls: {cert_file: $work/cert.pem, key_file: $work/key.pem}"
  nginx_tls="ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem; ssl_protocols TLSv1.3;"
fi
if [[ -n ${TLS_UPSTREAM:-} ]]; then
  upstream_scheme=https
  upstream_tls=", ca_file: $work/cert.pem"
  nginx_upstream_tls="proxy_ssl_server_name on; proxy_ssl_name localhost; proxy_ssl_session_reuse on;"
fi

# tokengate_config FILE PORT ENGINE_PORT (POOL_SIZE: the upstream pool's
# size, 256 unless set; 256 idle connections hold about 5 MB after a burst;
# ROUTE_EXTRA: more of the route's members, e.g. ', cache: {ttl: 10m}')
tokengate_config() {
  cat > "$1" <<YAML
log_level: warn
workers: 1
listeners: [{name: main, address: 127.0.0.1, port: $2$tokengate_tls}]
upstreams: {source: {base_url: "$upstream_scheme://127.0.0.1:$3/v1", pool_size: ${POOL_SIZE:-256}$upstream_tls}}
routes:
  - {name: bench, models: [bench], targets: [{upstream: source, model: demo}],
     max_output_tokens: {default: 256, ceiling: 256, mode: clamp}${ROUTE_EXTRA:-}}
YAML
}

# cpu_ns PID: the process's CPU time in ns, its threads' together: the
# scheduler's own count (schedstat), finer than /proc's 10 ms ticks.
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{ns += $1} END {printf "%.0f", ns}'; }

# cache_config FILE PORT ENGINE_PORT [ADMIN_PORT]: the response cache's
# benches (cache_hits.sh, cache_miss_cost.sh): one worker, route `cached`
# with `cache: {ttl: 10m, mode: always}` and route `asked` without one,
# both to the demo engine.
cache_config() {
  cat > "$1" <<YAML
log_level: warn
workers: 1
listeners: [{name: main, address: 127.0.0.1, port: $2}]
upstreams: {demo: {base_url: "http://127.0.0.1:$3/v1"}}
routes:
  - {name: cached, models: [cached], targets: [{upstream: demo}], cache: {ttl: 10m, mode: always}}
  - {name: asked, models: [asked], targets: [{upstream: demo}]}
YAML
  if [[ -n ${4:-} ]]; then echo "admin: {address: 127.0.0.1, port: $4}" >> "$1"; fi
}

# cache_load PORT MODEL REQUESTS CONCURRENCY OUT [BENCH-ARGS...]: the cache
# benches' load on core 1's side (this script's): one 200-token prompt
# asked REQUESTS times, the demo engine 20 ms to its first token and 64
# tokens a millisecond apart; `tokengate bench`'s JSON in OUT.
cache_load() {
  local port=$1 model=$2 requests=$3 concurrency=$4 out=$5
  shift 5
  "$bin" bench --url "http://127.0.0.1:$port/v1" --model "$model" --requests "$requests" \
    --concurrency "$concurrency" --prompt-tokens 200 --max-tokens 100 --json "$@" \
    --extra-body '{"demo":{"ttft_ms":20,"interval_ms":1,"tokens":64}}' > "$out"
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
    listen 127.0.0.1:$1${TLS:+ ssl};
    $nginx_tls
    location / { proxy_pass $upstream_scheme://source; proxy_http_version 1.1; proxy_set_header Connection ""; $nginx_upstream_tls
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
  local port=$2
  [[ -z ${TLS_UPSTREAM:-} ]] || port=$(free_port)
  taskset -c 1 "$1" demo-engine --port "$port" > "$work/engine.log" 2>&1 &
  pids+=($!)
  [[ -n ${TLS_UPSTREAM:-} ]] || return 0
  cat > "$work/front.yaml" <<YAML
log_level: warn
workers: 1
listeners: [{name: front, address: 127.0.0.1, port: $2, tls: {cert_file: $work/cert.pem, key_file: $work/key.pem}}]
upstreams: {engine: {base_url: "http://127.0.0.1:$port/v1", pool_size: 1024}}
routes: [{name: all, models: ["*"], targets: [{upstream: engine}]}]
YAML
  taskset -c 1 "$1" serve -c "$work/front.yaml" > "$work/front.log" 2>&1 &
  pids+=($!)
  wait_listening "$work/front.log"
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
