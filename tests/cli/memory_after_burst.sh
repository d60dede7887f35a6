#!/usr/bin/env bash
# memory.after_burst (docs/configuration.md), on the real binary and a
# burst of 2,000 streams:
#  - keep says so at start and, on mimalloc's heap, holds the memory the
#    burst took once it is over;
#  - give_back (the default) returns most of it within seconds;
#  - lazy_free says so at start and leaves the freed pages mapped but marked
#    free (smaps: LazyFree; /metrics: tokengate_memory_lazily_freed_bytes),
#    and, where the test may make a memory cgroup, the kernel takes them
#    back when the process's memory is limited.
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
lazy_free_kb() { awk '/LazyFree/ {print $2}' "/proc/$1/smaps_rollup"; }
burst() {  # PORT: 2,000 streams open at once, 5 tokens each
  "$bin" bench --url "http://127.0.0.1:$1/v1" --model demo --requests 2000 --concurrency 2000 --max-tokens 5 \
    --prompt-tokens 20 --json --extra-body '{"demo":{"ttft_ms":0,"interval_ms":200,"tokens":5}}' > "$work/bench.json" ||
    fail "the burst failed: $(cat "$work/bench.json")"
}

# The lazily freeing process runs in a memory cgroup of its own where one
# can be made (root, cgroup v1's memory controller or v2's), so that its
# memory can be limited after the burst. v1 reclaims when its limit is
# lowered and refuses (EBUSY) what it cannot reach. v2's memory.max would
# kill the process instead: there memory.high, which reclaims on the write
# and never kills.
cgroup="" usage_file="" limit_file="" no_limit=""
make_cgroup() {
  local name="tokengate-test-$$"
  if [[ -w /sys/fs/cgroup/memory ]] && mkdir "/sys/fs/cgroup/memory/$name" 2>/dev/null; then
    cgroup=/sys/fs/cgroup/memory/$name usage_file=memory.usage_in_bytes limit_file=memory.limit_in_bytes no_limit=-1
  elif [[ -w /sys/fs/cgroup/cgroup.procs ]] && grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null &&
    mkdir "/sys/fs/cgroup/$name" 2>/dev/null; then
    cgroup=/sys/fs/cgroup/$name usage_file=memory.current limit_file=memory.high no_limit=max
  fi
}
remove_cgroup() {
  [[ -n $cgroup ]] || return 0
  kill -9 $(cat "$cgroup/cgroup.procs") 2>/dev/null || true
  # (return 0, not a bare return: in a trap after `exit 1` a bare return
  # returns 1, and errexit then skips the cleanup after it.)
  for _ in $(seq 50); do rmdir "$cgroup" 2>/dev/null && return 0; sleep 0.1; done
}
trap 'remove_cgroup; cleanup' EXIT
in_cgroup() {  # COMMAND...: becomes it, inside $cgroup where there is one
  if [[ -n $cgroup ]]; then exec sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$cgroup" "$@"
  else exec "$@"; fi
}

write_config keep > "$work/keep.yaml"
start_server "$work/keep.yaml"
kept_pid=$server_pid kept_port=$port; pids+=("$kept_pid"); mv "$work/log" "$work/keep.log"
make_cgroup
write_config lazy_free > "$work/lazy.yaml"
start_server "$work/lazy.yaml" in_cgroup
lazy_pid=$server_pid lazy_port=$port lazy_admin=$admin; pids+=("$lazy_pid"); mv "$work/log" "$work/lazy.log"
write_config "" > "$work/give.yaml"
start_server "$work/give.yaml"
given_pid=$server_pid given_port=$port; pids+=("$given_pid")

heap=$(grep -o 'heap: .*' "$work/keep.log") || fail "no heap in the start-up log: $(cat "$work/keep.log")"
grep -q "kept until exit\|not trimmed after bursts" <<<"$heap" || fail "keep is not in effect: $heap"
grep -q "kept until exit\|not trimmed\|lazily" "$work/log" && fail "the default keeps memory too: $(grep -o 'heap: .*' "$work/log")"
lazy_heap=$(grep -o 'heap: .*' "$work/lazy.log") || fail "no heap in the start-up log: $(cat "$work/lazy.log")"
grep -q "given back lazily (MADV_FREE)\|lazy freeing needs mimalloc" <<<"$lazy_heap" || fail "lazy_free is not in effect: $lazy_heap"

if ! grep -q "mimalloc" <<<"$heap"; then
  echo "the binary runs on glibc's heap: only the start-up log is checked"
  exit 0
fi
lazy_before=$(rss_kb "$lazy_pid")
burst "$kept_port"
burst "$lazy_port"
burst "$given_port"
kept_after=$(rss_kb "$kept_pid") lazy_after=$(rss_kb "$lazy_pid") given_after=$(rss_kb "$given_pid")
# mimalloc gives pages back a second after they are freed, the server
# collects once the burst has been over for two checks a second apart (and
# again at the three checks after: without them give_back kept the whole
# burst one time in ten; allocator.cpp), and only the collect frees (and
# so marks) the pages a burst left half used.
# The lazy process's burst ended before give_back's began, but its checks
# run on a clock of their own: wait for both, not for give_back alone.
given_back() { (($(rss_kb "$given_pid") * 10 < given_after * 8)); }
lazily_freed_most() { (($(lazy_free_kb "$lazy_pid") * 2 > lazy_after - lazy_before)); }
for _ in $(seq 100); do
  given_back && lazily_freed_most && break
  sleep 0.1
done
kept_now=$(rss_kb "$kept_pid") given_now=$(rss_kb "$given_pid")
lazy_now=$(rss_kb "$lazy_pid") lazily_freed=$(lazy_free_kb "$lazy_pid")
echo "resident after the burst, then 0-10 s later: keep ${kept_after} -> ${kept_now} KB, give_back ${given_after} -> ${given_now} KB," \
  "lazy_free ${lazy_after} -> ${lazy_now} KB (${lazily_freed} KB of it lazily freed; ${lazy_before} KB before the burst)"
((given_now * 10 < given_after * 8)) || fail "give_back held its memory: ${given_after} -> ${given_now} KB"
((kept_now * 100 >= kept_after * 95)) || fail "keep gave its memory back: ${kept_after} -> ${kept_now} KB"
kept_lazily_freed=$(lazy_free_kb "$kept_pid")
((kept_now > 0 && kept_lazily_freed == 0)) || fail "keep's pages are marked lazily freed: ${kept_lazily_freed} KB of ${kept_now} KB"
# Most of what the burst took is freed whole, and so marked free.
((lazily_freed * 2 > lazy_after - lazy_before)) ||
  fail "lazy_free marked ${lazily_freed} KB of the ${lazy_after} - ${lazy_before} KB the burst took"
# ... and /metrics says so, beside the resident memory that still counts it.
gauge() {  # ADMIN_PORT NAME
  curl -sf "http://127.0.0.1:$1/metrics" | awk -v name="$2" '$1 == name {print $2}'
}
lazy_gauge=$(gauge "$lazy_admin" tokengate_memory_lazily_freed_bytes)
resident_gauge=$(gauge "$lazy_admin" process_resident_memory_bytes)
((lazy_gauge > lazily_freed * 1024 / 2 && resident_gauge >= lazy_gauge)) ||
  fail "/metrics: ${lazy_gauge:-no} lazily freed bytes of ${resident_gauge:-no} resident (smaps: ${lazily_freed} KB)"
given_lazy_gauge=$(gauge "$admin" tokengate_memory_lazily_freed_bytes)  # ($admin: the last server started)
[[ $given_lazy_gauge == 0 ]] || fail "give_back's /metrics shows ${given_lazy_gauge:-no} lazily freed bytes"

if [[ -z $cgroup ]]; then
  echo "no memory cgroup could be made here: the kernel's taking the pages back is not checked"
  exit 0
fi
# Ask the kernel for memory back: the process's limit is set to what it
# holds less three quarters of the lazily freed pages. The kernel must take
# them (anonymous memory without swap it could not: keep's refuses such a
# limit). The limit is lifted again as soon as the process is measured.
usage=$(cat "$cgroup/$usage_file")
limit=$((usage - lazily_freed * 1024 * 3 / 4))
echo "$limit" > "$cgroup/$limit_file" ||
  fail "the kernel did not take lazily freed pages back under a limit of $((limit / 1024)) KB ($limit_file; usage $((usage / 1024)) KB)"
[[ -e /proc/$lazy_pid/status ]] || fail "the lazy_free process died under a limit of $((limit / 1024)) KB"
limited=$(rss_kb "$lazy_pid") still_lazily_freed=$(lazy_free_kb "$lazy_pid") usage_limited=$(cat "$cgroup/$usage_file")
echo "$no_limit" > "$cgroup/$limit_file"
echo "limited to $((limit / 1024)) KB ($limit_file; usage $((usage / 1024)) -> $((usage_limited / 1024)) KB):" \
  "lazy_free resident ${lazy_now} -> ${limited} KB, ${still_lazily_freed} KB still lazily freed"
((limited < lazy_now - lazily_freed / 2)) ||
  fail "the kernel took under half the lazily freed pages: resident ${lazy_now} -> ${limited} KB," \
    "lazily freed ${lazily_freed} -> ${still_lazily_freed} KB, usage $((usage / 1024)) -> $((usage_limited / 1024)) KB"
