#!/usr/bin/env bash
# Black-box: the /metrics page's families and their label names, as
# dashboards and alert rules read them, against the checked-in list
# tests/fixtures/metrics_families.txt (a line per family: `name{label,...}
# type`). The proxy runs with every feature that adds families: budgets in
# a real redis-server, a demo engine read by its metrics page and balanced
# by balance: fastest with a queue and a response cache in Redis, prompts
# shared through Redis, traces, a TLS listener, a retry, a resumed stream and a refusal. (One replica: the
# page is then the same from run to run but for timings.) A family or
# label added, removed or renamed fails with its name; adding a metric is
# adding its line to the list. Each family has one HELP and one TYPE, and
# promtool (where installed) accepts the page.
#   METRICS_PAGE=FILE keeps the scraped page.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"
expected_list="$(dirname "$0")/../fixtures/metrics_families.txt"
start_redis_server
start_demo_fleet 1 --slots 4 --decode-tps 400 --prefill-ms-per-1k 20

key=sk-metrics-test
mkdir -p "$work/tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=localhost" \
  -keyout "$work/tls/key.pem" -out "$work/tls/cert.pem" 2> /dev/null
cat > "$work/all.yaml" <<YAML
listeners:
  - {name: main, address: 127.0.0.1, port: 0}
  - name: secure
    address: 127.0.0.1
    port: 0
    tls: {cert_file: $work/tls/cert.pem, key_file: $work/tls/key.pem}
upstreams:
$(fleet_upstreams "capacity: {max_streams: 4, kv_tokens: 100000}" \
  "health_check: {path: /health, interval: 1s, timeout: 1s}" \
  "engine_metrics: {path: /metrics, interval: 200ms}")
routes:
  - name: fleet
    models: [fleet-model]
    targets: [{upstream: e1}]
    balance: fastest
    queue: {max_waiting: 16, timeout: 10s}
    resume: {mode: restart}
    cache: {ttl: 60s, mode: always}
keys:
  - name: app
    sha256: "$("$bin" hash-key "$key")"
    budget: {tokens_per_minute: 1000000, requests_per_minute: 1000}
redis: {url: "redis://127.0.0.1:$redis_port", timeout: 500ms}
cache: {store: redis}
tracing: {endpoint: "http://127.0.0.1:1/v1/traces", export_interval: 200ms, timeout: 200ms, retries: 0}
admin: {address: 127.0.0.1, port: 0}
workers: 2
YAML
"$bin" check -c "$work/all.yaml" > /dev/null || fail "check refused the config"
start_server "$work/all.yaml"

ask() {  # DEMO-KNOBS: one streamed answer through the fleet route, its status
  curl -s -m 20 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
    -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -d "{\"model\":\"fleet-model\",\"max_tokens\":8,\"stream\":true,\"demo\":$1,\"messages\":[{\"role\":\"user\",\"content\":\"count\"}]}"
}
[[ $(ask '{}') == 200 ]] || fail "a plain request failed"
[[ $(ask '{}') == 200 ]] || fail "a plain request asked again (a cache hit) failed"
[[ $(ask '{"status":500,"fail_times":1}') == 200 ]] || fail "the retried request failed"
[[ $(ask '{"reset_after":3,"fail_times":1}') == 200 ]] || fail "the resumed request failed"
# A request with no key: an error by side and code.
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
  -d '{"model":"fleet-model"}') == 401 ]] || fail "a request without a key was not refused"
# The engines' own queues arrive with their next metrics page.
for _ in $(seq 100); do
  metrics_match '^tokengate_upstream_engine_requests{' && break
  sleep 0.05
done
page=$(curl -sf "http://127.0.0.1:$admin/metrics") || fail "no /metrics page"
[[ -z ${METRICS_PAGE:-} ]] || printf '%s\n' "$page" > "$METRICS_PAGE"

# One line per family and label-name list (a histogram's `le` and the
# suffixes of its samples left out), in the page's order; label values
# are skipped with their escapes. Samples of no declared family, and a
# family's HELP or TYPE twice or missing, are listed as problems.
families() {
  awk '
    function problem(what) { print "problem: " what; bad = 1 }
    /^# HELP / { if (help[$3]++) problem("two HELP lines for " $3); next }
    /^# TYPE / {
      if (type[$3]) problem("two TYPE lines for " $3)
      if (!help[$3]) problem("no HELP line for " $3)
      type[$3] = $4; order[++n] = $3; next
    }
    /^#/ || /^$/ { next }
    {
      name = $0; sub(/[{ ].*/, "", name)
      family = name
      if (!(family in type)) {
        base = family; sub(/_(bucket|sum|count)$/, "", base)
        if ((base in type) && type[base] == "histogram") family = base
      }
      if (!(family in type)) { problem("a sample of no declared family: " name); next }
      rest = substr($0, length(name) + 1)
      labels = ""
      if (substr(rest, 1, 1) == "{") {
        rest = substr(rest, 2)
        while (match(rest, /^[a-zA-Z_][a-zA-Z0-9_]*="/)) {
          label = substr(rest, 1, RLENGTH - 2)
          rest = substr(rest, RLENGTH + 1)
          while (rest != "" && substr(rest, 1, 1) != "\"")
            rest = substr(rest, substr(rest, 1, 1) == "\\" ? 3 : 2)
          rest = substr(rest, 2)
          sub(/^,/, "", rest)
          if (!(label == "le" && type[family] == "histogram"))
            labels = labels (labels == "" ? "" : ",") label
        }
      }
      line = family (labels == "" ? "" : "{" labels "}") " " type[family]
      if (!(line in seen)) { seen[line] = 1; lines[family] = lines[family] line "\n" }
    }
    END {
      for (i = 1; i <= n; ++i)
        printf "%s", (order[i] in lines) ? lines[order[i]] : order[i] " " type[order[i]] "\n"
      exit bad
    }' <<< "$page"
}
found=$(families) || fail "the page is not well formed: $(grep '^problem' <<< "$found")"
expected=$(grep -v -e '^#' -e '^$' "$expected_list")
missing=$(comm -23 <(sort <<< "$expected") <(sort <<< "$found"))
extra=$(comm -13 <(sort <<< "$expected") <(sort <<< "$found"))
if [[ -n $missing || -n $extra ]]; then
  echo "--- the page's families now:"$'\n'"$found"
  changes="the /metrics families or their labels changed (a new metric is a new line in"
  changes+=" tests/fixtures/metrics_families.txt; dashboards and rules read the others):"
  changes+=$'\n'"--- listed, not on the page (removed or renamed):"$'\n'"${missing:-(none)}"
  changes+=$'\n'"--- on the page, not listed (new or renamed):"$'\n'"${extra:-(none)}"
  fail "$changes"
fi
if command -v promtool > /dev/null; then
  lint=$(promtool check metrics <<< "$page" 2>&1) || fail "promtool refused the page: $lint"
fi
stop_server
echo "cli_metrics_families: $(wc -l <<< "$found") families and label sets as listed"
