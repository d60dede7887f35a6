#!/usr/bin/env bash
# No container engine runs in CI, so the Dockerfile is checked against what
# it must agree with:
#  - the runtime stage installs a package for every library the binary links
#    (ldd + dpkg -S), beyond the base image's libc6 and libgcc-s1;
#  - the build stage installs only packages scripts/setup also installs, and
#    the files it copies are enough to configure the build;
#  - the image's default config passes `tokengate check`, and the image's
#    command runs as its non-root user (setpriv), answers its HEALTHCHECK
#    command, and drains and exits 0 on its STOPSIGNAL.
set -euo pipefail
bin=$(readlink -f "$1")
root=$2
source "$(dirname "$0")/../support/shell_lib.sh"
dockerfile=$root/deploy/docker/Dockerfile

# apt-get install list of stage N (0 = build, 1 = runtime).
stage_packages() {
  awk -v want="$1" '/^FROM /{stage++} stage==want+1' "$dockerfile" |
    sed -n '/apt-get install/,/&&/p' | tr ' \\' '\n\n' |
    grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vE '^(apt-get|install|rm)$' | sort -u
}
build_pkgs=$(stage_packages 0)
runtime_pkgs=$(stage_packages 1)
[[ -n $build_pkgs && -n $runtime_pkgs ]] || fail "could not read the package lists"

# A sanitizer build (scripts/sanitize) links its runtime: not an image binary.
if grep -qE 'lib(asan|ubsan|tsan)' <<<"$(ldd "$bin")"; then
  echo "dockerfile_test: sanitizer build, not the image's binary; skipped"
  exit 77
fi

# 1. Every linked library is installed in the runtime stage.
linked=$(ldd "$bin" | awk '/=>/{print $3}' | while read -r lib; do
  dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null || echo "unknown: $lib"
done | cut -d: -f1 | sort -u)
grep -q '^unknown' <<<"$linked" && fail "libraries from no package: $linked"
for pkg in $linked; do
  case $pkg in libc6|libgcc-s1) continue ;; esac  # in debian:12-slim itself
  grep -qx "$pkg" <<<"$runtime_pkgs" || fail "the binary links $pkg but the runtime stage does not install it"
done
echo "runtime stage covers: $(echo $linked)"

# 2. The build stage's packages are a subset of what scripts/setup installs.
for pkg in $build_pkgs; do
  grep -qw -- "$pkg" "$root/scripts/setup" || fail "build stage installs $pkg, which scripts/setup does not"
done

# ... and its COPY lines carry everything CMake needs to configure.
mkdir "$work/context"
grep -E '^COPY [^-]' "$dockerfile" | grep -v -- '--from' | while read -r _ src dst; do
  mkdir -p "$work/context/$(dirname "$src")"
  cp -r "$root/$src" "$work/context/$src"
done
cmake -S "$work/context" -B "$work/context/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
  > "$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "the build stage's files do not configure"; }

# 3. Non-root user, health check, config path and signal, as the image runs.
grep -qE '^USER 10001:10001$' "$dockerfile" || fail "runtime user is not the non-root 10001"
grep -q 'CMD \["serve", "-c", "/etc/tokengate/tokengate.yaml"\]' "$dockerfile" || fail "CMD does not serve the mounted config path"
grep -q '^STOPSIGNAL SIGTERM' "$dockerfile" || fail "STOPSIGNAL is not SIGTERM (the drain signal)"
health_url=$(grep -A1 '^HEALTHCHECK' "$dockerfile" | grep -o 'http://[^"]*')
[[ $health_url == http://127.0.0.1:9090/healthz ]] || fail "HEALTHCHECK url $health_url"
grep -q 'port: 9090' <(sed -n '/^admin:/,/^$/p' "$root/deploy/docker/tokengate.yaml") || fail "HEALTHCHECK port is not the config's admin port"
"$bin" check -c "$root/deploy/docker/tokengate.yaml" > /dev/null || fail "the image's default config does not check"

ephemeral_ports "$root/deploy/docker/tokengate.yaml" > "$work/tokengate.yaml"
chmod 0444 "$work/tokengate.yaml"; chmod 0755 "$work"
prefix=()
if [[ $(id -u) -eq 0 ]] && command -v setpriv > /dev/null; then
  cp "$bin" "$work/tokengate"; chmod 0755 "$work/tokengate"; bin=$work/tokengate
  prefix=(setpriv --reuid 10001 --regid 10001 --clear-groups)
fi
start_server "$work/tokengate.yaml" "${prefix[@]}"
if ((${#prefix[@]})); then
  [[ $(stat -c %u /proc/$server_pid) == 10001 ]] || fail "not running as uid 10001"
fi
"$bin" probe "${health_url/9090/$admin}" > /dev/null || fail "HEALTHCHECK command failed"
reply=$(curl -s "http://127.0.0.1:$port/v1/chat/completions" -d '{"model":"any","max_tokens":2}')
grep -q '"finish_reason"' <<<"$reply" || fail "no completion through the image's default config: $reply"
# (The request is recorded just after its last byte: allow a moment.)
for _ in $(seq 50); do
  metrics_match -x 'tokengate_downstream_rq_total 1' && break
  sleep 0.02
done
metrics_match -x 'tokengate_downstream_rq_total 1' || fail "the request did not pass through tokengate"
stop_server
if "$bin" probe "${health_url/9090/$admin}" > /dev/null 2>&1; then fail "HEALTHCHECK passes after stop"; fi
echo "dockerfile_test: passed"
