#!/usr/bin/env bash
# deploy/systemd/tokengate.service: `systemd-analyze verify` with no warning
# (an unknown or misspelt key is only a warning there, so any output fails),
# the hardening the unit promises, a stop timeout longer than every shipped
# policy's drain_timeout, and its ExecStartPre/ExecStart command lines
# accepted by the real binary. Exit 77 (skipped) without systemd-analyze.
set -euo pipefail
bin=$(readlink -f "$1")
root=$2
source "$(dirname "$0")/../support/shell_lib.sh"
unit=$root/deploy/systemd/tokengate.service

for line in User=tokengate NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
            CapabilityBoundingSet= 'ExecReload=/bin/kill -HUP $MAINPID' KillSignal=SIGTERM; do
  grep -qxF -- "$line" "$unit" || fail "unit lacks '$line'"
done

# Stop timeout > the longest drain_timeout we ship, or systemd SIGKILLs streams.
seconds() { local v=$1; case $v in *ms) echo 0 ;; *s) echo "${v%s}" ;; *m) echo $((${v%m} * 60)) ;; esac; }
stop=$(seconds "$(sed -n 's/^TimeoutStopSec=//p' "$unit")")
for policy in "$root"/config/*.yaml "$root"/deploy/docker/tokengate.yaml; do
  drain=$(sed -n 's/^drain_timeout: *\([0-9]*[a-z]*\).*/\1/p' "$policy")
  [[ -z $drain ]] && drain=30s   # the built-in default
  (( stop > $(seconds "$drain") )) || fail "TimeoutStopSec ${stop}s is not above $policy's drain_timeout $drain"
done

# The command lines, with the binary and config where this test has them.
ephemeral_ports "$root/config/tokengate.yaml" > "$work/tokengate.yaml"
sed "s|/usr/local/bin/tokengate|$bin|g; s|/etc/tokengate/tokengate.yaml|$work/tokengate.yaml|g" "$unit" \
  > "$work/tokengate.service"
pre=$(sed -n 's/^ExecStartPre=//p' "$work/tokengate.service")
$pre > /dev/null || fail "ExecStartPre failed: $pre"
start=$(sed -n 's/^ExecStart=//p' "$work/tokengate.service")
[[ $start == "$bin serve -c $work/tokengate.yaml" ]] || fail "unexpected ExecStart: $start"
start_server "$work/tokengate.yaml"
kill -HUP "$server_pid"   # what ExecReload sends
for _ in $(seq 100); do grep -q "reload: policy from" "$work/log" && break; sleep 0.05; done
grep -q "reload: policy from" "$work/log" || fail "SIGHUP did not reload"
stop_server

if ! command -v systemd-analyze > /dev/null; then
  echo "systemd_test: systemd-analyze not installed; verify skipped"
  exit 77
fi
systemd-analyze verify "$work/tokengate.service" > "$work/verify.out" 2>&1 || true
[[ ! -s $work/verify.out ]] || fail "systemd-analyze verify: $(cat "$work/verify.out")"
echo "systemd_test: passed"
