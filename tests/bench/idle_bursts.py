#!/usr/bin/env python3
"""Scenario 6's load in bursts with pauses between them, against one tokengate
binary: for each burst, the TTFT p99 of the 200 KB prompts, and the page
faults and CPU the proxy took. On demand, not a test.

A pause longer than the heap keeps freed pages (a second, server/allocator.hpp)
showed why scenario 6's tail sat above nginx's: the bodies' buffers were
faulted in again at every burst (docs/performance.md, "Optimisation 25").

Usage: tests/bench/idle_bursts.py TOKENGATE_BIN [BURSTS] [PAUSE_S]
  tests/bench/idle_bursts.py build/tokengate 5 3
The proxy runs on core 0; the demo engine and the load (`tokengate bench`:
63 prompts of 200 KB at a time, 2,048 a burst, with one 4 MB prompt at a
time beside them) on core 1.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

binary = sys.argv[1]
bursts = int(sys.argv[2]) if len(sys.argv) > 2 else 5
pause_s = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


work = tempfile.mkdtemp()
engine_port, proxy_port = free_port(), free_port()
with open(f"{work}/tokengate.yaml", "w") as f:
    f.write(f"""log_level: warn
workers: 1
listeners: [{{name: main, address: 127.0.0.1, port: {proxy_port}}}]
upstreams: {{source: {{base_url: "http://127.0.0.1:{engine_port}/v1", pool_size: 256}}}}
routes:
  - {{name: bench, models: [bench], targets: [{{upstream: source, model: demo}}],
     max_output_tokens: {{default: 256, ceiling: 256, mode: clamp}}}}
""")
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
engine = subprocess.Popen(["taskset", "-c", "1", binary, "demo-engine", "--port", str(engine_port)], **quiet)
proxy = subprocess.Popen(["taskset", "-c", "0", binary, "serve", "-c", f"{work}/tokengate.yaml"], **quiet)
fast = json.dumps({"demo": {"ttft_ms": 0, "interval_ms": 0, "tokens": 20}})


def load(requests, concurrency, prompt_tokens):
    return subprocess.Popen(
        ["taskset", "-c", "1", binary, "bench", "--url", f"http://127.0.0.1:{proxy_port}/v1", "--model", "bench",
         "--requests", str(requests), "--concurrency", str(concurrency), "--max-tokens", "20",
         "--prompt-tokens", str(prompt_tokens), "--json", "--extra-body", fast],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def proxy_counts():
    fields = open(f"/proc/{proxy.pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[7]), int(fields[11]), int(fields[12])  # minor faults, user and system ticks


try:
    time.sleep(1)
    load(64, 63, 50000).wait()  # warm-up: connections
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    for burst in range(bursts):
        time.sleep(pause_s)
        before = proxy_counts()
        prompts, big = load(2048, 63, 50000), load(48, 1, 1000000)
        r, b = json.loads(prompts.communicate()[0])[0], json.loads(big.communicate()[0])[0]
        after = proxy_counts()
        assert r["ok"] == r["requests"] and b["ok"] == b["requests"], "errors in the load"
        faults = after[0] - before[0]
        print(f"burst {burst}: TTFT p99 {r['ttft_ms']['p99']:.1f} ms; proxy: {faults} page faults "
              f"({faults / (r['requests'] + b['requests']):.2f} a request), user {(after[1] - before[1]) * tick_ms:.0f} ms, "
              f"system {(after[2] - before[2]) * tick_ms:.0f} ms", flush=True)
finally:
    proxy.kill()
    engine.kill()
    shutil.rmtree(work, ignore_errors=True)
