#!/usr/bin/env bash
# scripts/check_paths passes a small tree whose comments and docs name only
# paths that exist (in the ways the code writes them), and fails the same
# tree once a comment and a doc name files that are not there.
# Usage: paths_check_test.sh SOURCE_DIR
set -euo pipefail
check="$(cd "$1" && pwd)/scripts/check_paths"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
git init -q .

mkdir -p proxy/server proxy/http docs scripts tests/fuzz/corpus/sse
mkdir .ci
touch proxy/http/body_decoder.hpp proxy/http/body_decoder.cpp scripts/run .ci/run
cat > proxy/server/worker.hpp << 'EOF'
#pragma once
#include "http/body_decoder.hpp"
#include <boost/beast/http/read.hpp>
// Reads bodies with http/body_decoder.hpp (proxy/http/body_decoder.cpp),
// the pair http/body_decoder; a path broken over two lines (http/
// body_decoder.hpp) is read whole. Started by scripts/run.
inline const char* where = "server/made_up_in_a_string.hpp";  // not prose
/* docs/guide.md, and in a block comment
   proxy/server/worker.hpp */
EOF
cat > docs/guide.md << 'EOF'
See `server/worker.hpp`, https://example.com/docs/missing.md, /tmp/config/x.yaml,
`GET /v1/chat/completions`, tests/fuzz/corpus/TARGET/, `proxy/*/*.hpp` and
build/tokengate. Served over http/1.1; CI runs .ci/run.
EOF
git add .
bash "$check" "$work"

printf '// The head is read in server/request_head.hpp, its end by (server/\n// end_of_head.hpp).\n' >> proxy/server/worker.hpp
echo 'Reading: docs/gone.md.' >> docs/guide.md
git add .
if bash "$check" "$work" > "$work/out"; then
  echo "a comment and a doc naming missing files passed the check"; exit 1
fi
grep -q '^  proxy/server/worker.hpp:10: server/request_head.hpp$' "$work/out"
grep -q '^  proxy/server/worker.hpp:10: server/end_of_head.hpp$' "$work/out"
grep -q '^  docs/guide.md:4: docs/gone.md$' "$work/out"
if [ "$(grep -c '^  ' "$work/out")" != 3 ]; then
  echo "the check reported other than the three missing paths:"; cat "$work/out"; exit 1
fi
echo "paths check: ok"
