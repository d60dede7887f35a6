#!/usr/bin/env bash
# memory.after_burst (docs/configuration.md): the real binary with `keep`
# says so at start and, on mimalloc's heap, holds the memory a burst of
# 2,000 streams took once the burst is over, while the same binary with the
# default (`give_back`) returns most of it within seconds.
set -euo pipefail
bin=$(readlink -f "$1")
source "$(dirname "$0")/../support/shell_lib.sh"
start_demo_engine

write_config() {  # AFTER_BURST
  cat <<YAML
workers: 1
listeners: [{name: main, address: 127.0.0.1, port: 0, upstream: demo}]
upstreams: {demo: {base_url: "http://127.0.0.1:$engine/v1"}}
admin: {address: 127.0.0.1, port: 0}
YAML
  [[ -z $1 ]] || echo "memory: {after_burst: $1}"
}
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
burst() {  # PORT: 2,000 streams open at once, 5 tokens each
  "$bin" bench --url "http://127.0.0.1:$1/v1" --model demo --requests 2000 --concurrency 2000 --max-tokens 5 \
    --prompt-tokens 20 --json --extra-body '{"demo":{"ttft_ms":0,"interval_ms":200,"tokens":5}}' > "$work/bench.json" ||
    fail "the burst failed: $(cat "$work/bench.json")"
}

write_config keep > "$work/keep.yaml"
start_server "$work/keep.yaml"
kept_pid=$server_pid kept_port=$port; pids+=("$kept_pid"); mv "$work/log" "$work/keep.log"
write_config "" > "$work/give.yaml"
start_server "$work/give.yaml"
given_pid=$server_pid given_port=$port; pids+=("$given_pid")

heap=$(grep -o 'heap: .*' "$work/keep.log") || fail "no heap in the start-up log: $(cat "$work/keep.log")"
grep -q "kept until exit\|not trimmed after bursts" <<<"$heap" || fail "keep is not in effect: $heap"
grep -q "kept until exit\|not trimmed" "$work/log" && fail "the default keeps memory too: $(grep -o 'heap: .*' "$work/log")"

if ! grep -q "mimalloc" <<<"$heap"; then
  echo "the binary runs on glibc's heap: only the start-up log is checked"
  exit 0
fi
burst "$kept_port"
burst "$given_port"
kept_after=$(rss_kb "$kept_pid") given_after=$(rss_kb "$given_pid")
# mimalloc gives pages back a second after they are freed, the server
# collects once the burst has been over for two checks a second apart.
for _ in $(seq 80); do
  (($(rss_kb "$given_pid") * 10 < given_after * 8)) && break
  sleep 0.1
done
kept_now=$(rss_kb "$kept_pid") given_now=$(rss_kb "$given_pid")
echo "resident after the burst, then 0-8 s later: keep ${kept_after} -> ${kept_now} KB, give_back ${given_after} -> ${given_now} KB"
((given_now * 10 < given_after * 8)) || fail "give_back held its memory: ${given_after} -> ${given_now} KB"
((kept_now * 100 >= kept_after * 95)) || fail "keep gave its memory back: ${kept_after} -> ${kept_now} KB"
