#!/usr/bin/env bash
# Black-box certificate rotation on the real binary: a certificate replaced in
# place is picked up by the file watcher within seconds; one replaced with the
# old modification time (so the watcher cannot see it) is picked up by
# SIGHUP; a broken one is refused and the running certificate stays.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"

make_cert() {  # $1: common name, $2: folder
  mkdir -p "$2"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=$1" \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$2/key.pem" -out "$2/cert.pem" 2>/dev/null
}
# Writes aside and renames over, as cert-manager and certbot do.
install_cert() {  # $1: folder
  cp "$1/cert.pem" "$work/live/cert.pem.new" && mv "$work/live/cert.pem.new" "$work/live/cert.pem"
  cp "$1/key.pem" "$work/live/key.pem.new" && mv "$work/live/key.pem.new" "$work/live/key.pem"
}
presented() {  # the common name new connections see
  openssl s_client -connect "127.0.0.1:$port" -servername localhost < /dev/null 2> /dev/null |
    openssl x509 -noout -subject -nameopt multiline 2> /dev/null | sed -n 's/ *commonName *= *//p'
}
wait_for_name() {  # $1: expected common name, $2: what failed
  for _ in $(seq 50); do [[ $(presented) == "$1" ]] && return 0; sleep 0.1; done
  fail "$2 (presented: '$(presented)')"
}

for name in first second third; do make_cert "$name" "$work/$name"; done
mkdir -p "$work/live"
install_cert "$work/first"
cat > "$work/cfg.yaml" <<YAML
listeners:
  - name: public
    address: 127.0.0.1
    port: 0
    upstream: demo
    tls: {cert_file: $work/live/cert.pem, key_file: $work/live/key.pem}
upstreams:
  demo: {base_url: "http://127.0.0.1:1/v1"}
admin: {address: 127.0.0.1, port: 0}
YAML
start_server "$work/cfg.yaml"
[[ $(presented) == first ]] || fail "the starting certificate is not presented"

sleep 1.1  # a modification time the watcher can tell apart
install_cert "$work/second"
wait_for_name second "the file watcher did not pick up the new certificate"
grep -q "listener 'public' presents the certificate" "$work/log" || fail "the rotation was not logged"

touch -r "$work/live/cert.pem" "$work/third/cert.pem"
touch -r "$work/live/key.pem" "$work/third/key.pem"
cp -p "$work/third/cert.pem" "$work/live/cert.pem"
cp -p "$work/third/key.pem" "$work/live/key.pem"
sleep 1.5
[[ $(presented) == second ]] || fail "the watcher reloaded files whose times did not change (the SIGHUP check below would prove nothing)"
kill -HUP "$server_pid"
wait_for_name third "SIGHUP did not reload the certificate"

echo "not a key" > "$work/live/key.pem"
kill -HUP "$server_pid"
for _ in $(seq 50); do grep -q "certificate reload refused for listener 'public'" "$work/log" && break; sleep 0.1; done
grep -q "certificate reload refused for listener 'public'.*key.pem" "$work/log" || fail "a broken key was not refused by name"
[[ $(presented) == third ]] || fail "a broken key replaced the running certificate"
metrics_match 'tokengate_tls_certificate_reloads_total{result="failure"} [1-9]' ||
  fail "the refused reload was not counted"
stop_server
echo "PASS: certificates rotate by file watch and by SIGHUP; a broken one is refused"
