#!/usr/bin/env bash
# cmake/check_layers.cmake passes the real tree, and fails a tree in which
# a lower layer includes a higher one, a folder has no layer, or files of
# one folder include each other in a loop.
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

# Loops of includes inside one folder: each is refused and named in order,
# from the file the search met first.
mkdir -p "$work/two/proxy/server"
echo '#include "server/b.hpp"' > "$work/two/proxy/server/a.hpp"
echo '#include "../server/a.hpp"' > "$work/two/proxy/server/b.hpp"
if "$cmake" -DROOT="$work/two" -P "$check" 2> "$work/two.err"; then
  echo "two headers that include each other passed the check"; exit 1
fi
grep -q 'proxy/server/a.hpp -> proxy/server/b.hpp -> proxy/server/a.hpp (a cycle inside server/)' "$work/two.err"
if [ "$(grep -c ' -> ' "$work/two.err")" != 1 ]; then
  echo "one loop of two headers was not reported exactly once"; exit 1
fi

mkdir -p "$work/three/proxy/stream"
echo '#include <stream/b.hpp>' > "$work/three/proxy/stream/a.hpp"
echo '#include "stream/c.hpp"' > "$work/three/proxy/stream/b.hpp"
printf '#include "http/x.hpp"\n#include "stream/a.hpp"\n' > "$work/three/proxy/stream/c.hpp"
if "$cmake" -DROOT="$work/three" -P "$check" 2> "$work/three.err"; then
  echo "three headers in a loop passed the check"; exit 1
fi
grep -q 'proxy/stream/a.hpp -> proxy/stream/b.hpp -> proxy/stream/c.hpp -> proxy/stream/a.hpp (a cycle inside stream/)' "$work/three.err"

# A chain that only goes one way, and a .cpp that includes its own header
# (which includes the next in the chain), are no loop.
mkdir -p "$work/chain/proxy/server"
echo '#include "server/b.hpp"' > "$work/chain/proxy/server/a.hpp"
echo '#include "server/c.hpp"' > "$work/chain/proxy/server/b.hpp"
echo '' > "$work/chain/proxy/server/c.hpp"
printf '#include "server/a.hpp"\n#include "server/c.hpp"\n' > "$work/chain/proxy/server/a.cpp"
echo '#include "server/b.hpp"' > "$work/chain/proxy/server/b.cpp"
"$cmake" -DROOT="$work/chain" -P "$check"
echo "layer check: ok"
