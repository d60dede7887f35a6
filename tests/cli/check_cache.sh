#!/usr/bin/env bash
# Black-box: `tokengate check` refuses a response cache it cannot keep
# safe, with the file, the line and why: scope: route on a route whose keys
# may use different models (one key would read answers its permissions
# could not have asked for), a cache without a ttl, store: redis without
# redis:. The same route with scope: key passes.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"

config() {  # CACHE [TOP-LEVEL LINES]
  cat > "$work/c.yaml" <<YAML
listeners:
  - {name: main, address: 127.0.0.1, port: 0}
upstreams:
  local: {base_url: "http://127.0.0.1:1"}
routes:
  - {name: r, models: ['*'], targets: [{upstream: local}], cache: $1}
keys:
  - {name: a, sha256: $(printf 'a%.0s' {1..64}), models: [x]}
  - {name: b, sha256: $(printf 'b%.0s' {1..64})}
${2:-}
YAML
}
refused() {  # EXPECTED-TEXT: check fails, saying it
  local out
  if out=$("$bin" check -c "$work/c.yaml" 2>&1); then fail "check passed: $(cat "$work/c.yaml")"; fi
  [[ $out == *"$work/c.yaml:"* && $out == *"$1"* ]] || fail "check said: $out"
}
config "{ttl: 1m, scope: route}"
refused "the keys may use different models"
config "{scope: key}"
refused "needs a 'ttl'"
config "{ttl: 1m}" "cache: {store: redis}"
refused "needs the top-level 'redis:'"
config "{ttl: 1m, scope: key, pace: original, bill_hits: true}"
"$bin" check -c "$work/c.yaml" > /dev/null || fail "check refused scope: key"
echo "ok"
