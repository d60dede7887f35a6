#!/usr/bin/env bash
# Black-box: `tokengate demo-engine --apis chat_completions` serves chat
# completions alone, as llama.cpp's server does: the other APIs' paths
# answer 404 with an OpenAI-style error. A name it does not know stops it
# with a message that lists the names it knows.
set -euo pipefail
bin=$1
source "$(dirname "$0")/../support/shell_lib.sh"

start_demo_engine --apis chat_completions
post() {  # PATH BODY: the status, then the body
  curl -s -m 10 -w '\n%{http_code}' "http://127.0.0.1:$engine$1" -H 'content-type: application/json' -d "$2"
}
answer=$(post /v1/chat/completions '{"model":"demo","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}')
[[ ${answer##*$'\n'} == 200 ]] || fail "chat completions answered: $answer"
for path in /v1/responses /v1/completions /v1/messages /v1/embeddings; do
  answer=$(post "$path" '{"model":"demo","input":"hi","prompt":"hi","max_tokens":2,"messages":[]}')
  [[ ${answer##*$'\n'} == 404 ]] || fail "$path answered: $answer"
  grep -q '"type":"not_found_error"' <<< "$answer" || fail "$path: not OpenAI's error shape: $answer"
done

if "$bin" demo-engine --port 0 --apis chat,responses > "$work/bad.log" 2>&1; then
  fail "an unknown API name was accepted"
fi
grep -q "unknown API 'chat'" "$work/bad.log" || fail "the refusal does not name the API: $(cat "$work/bad.log")"
grep -q "chat_completions, completions, responses, messages, embeddings" "$work/bad.log" ||
  fail "the refusal does not list the names: $(cat "$work/bad.log")"
echo "cli_demo_engine_apis: other APIs answer 404; unknown names are refused"
