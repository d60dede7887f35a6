#!/usr/bin/env bash
# cmake/check_layers.cmake passes the real tree, and fails a tree in which
# a lower layer includes a higher one or a folder has no layer.
# Usage: layers_check_test.sh CMAKE SOURCE_DIR
set -euo pipefail
cmake=$1 root=$2
check="$root/cmake/check_layers.cmake"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$cmake" -DROOT="$root" -P "$check"

mkdir -p "$work/up/proxy/stream" "$work/up/proxy/server"
echo '#include "server/worker.hpp"' > "$work/up/proxy/stream/relay.cpp"
echo '#include "stream/relay.hpp"' > "$work/up/proxy/server/session.cpp"
if "$cmake" -DROOT="$work/up" -P "$check" 2> "$work/up.err"; then
  echo "an include from stream/ up to server/ passed the check"; exit 1
fi
grep -q 'proxy/stream/relay.cpp: #include "server/worker.hpp"' "$work/up.err"
if grep -q 'proxy/server/session.cpp' "$work/up.err"; then
  echo "an include down the layers was reported"; exit 1
fi

# The same include written <server/…> or "../server/…" is the same arrow.
for spelling in '<server/worker.hpp>' '"../server/worker.hpp"'; do
  rm -rf "$work/spelt" && mkdir -p "$work/spelt/proxy/stream"
  echo "#include $spelling" > "$work/spelt/proxy/stream/relay.cpp"
  echo '#include <boost/beast/http/read.hpp>' >> "$work/spelt/proxy/stream/relay.cpp"
  if "$cmake" -DROOT="$work/spelt" -P "$check" 2> "$work/spelt.err"; then
    echo "an include from stream/ up to server/ written $spelling passed the check"; exit 1
  fi
  if grep -q 'boost' "$work/spelt.err"; then
    echo "a library's include was taken for one of ours"; exit 1
  fi
done

mkdir -p "$work/side/proxy/engine" "$work/side/proxy/bench"
echo '#include "engine/demo_engine.hpp"' > "$work/side/proxy/bench/bench.cpp"
if "$cmake" -DROOT="$work/side" -P "$check" 2> /dev/null; then
  echo "an include between two folders of one layer passed the check"; exit 1
fi

mkdir -p "$work/stray/proxy/elsewhere"
echo '' > "$work/stray/proxy/elsewhere/a.cpp"
if "$cmake" -DROOT="$work/stray" -P "$check" 2> /dev/null; then
  echo "a folder with no layer passed the check"; exit 1
fi
echo "layer check: ok"
