// Hostile clients (issue #6): 10,000 idle connections (half of them with a
// started request head, a slowloris crowd under the head timeout) are held
// open against the real binary while normal requests are still served
// quickly. The proxy runs in its own process, so each side needs about
// 10,000 file descriptors, within a 20,000 limit. That is above the default
// max_connections (half the descriptor limit, for streams that each hold an
// upstream connection too), so this proxy is told that most will be idle.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { readdirSync } from "node:fs";
import { startProxy } from "./harness.mjs";

const IDLE = 10000;
let proxy;
before(async () => (proxy = await startProxy({ topYaml: ["limits: {max_connections: 15000}"] })));
after(async () => proxy && (await proxy.stop()));

function open(port, i) {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1", () => {
      if (i % 2) s.write("POST /v1/chat/completions HTTP/1.1\r\n");
      resolve(s);
    });
    s.on("error", reject);
  });
}

test("10,000 idle connections do not stop normal requests", { timeout: 60000 }, async () => {
  const sockets = [];
  for (let i = 0; i < IDLE; i += 500) {
    const batch = [];
    for (let k = i; k < i + 500; k++) batch.push(open(proxy.port, k));
    sockets.push(...(await Promise.all(batch)));
  }
  const closedEarly = sockets.filter((s) => s.destroyed).length;
  assert.equal(closedEarly, 0);
  // The proxy accepts every one of them (one descriptor each); the kernel
  // completes connections before the proxy accepts them, so give it time.
  let fds = 0;
  for (let i = 0; i < 200 && fds < IDLE; i++) {
    fds = readdirSync(`/proc/${proxy.pid}/fd`).length;
    if (fds < IDLE) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(fds >= IDLE, `proxy has ${fds} descriptors open`);

  const slowest = [];
  for (let i = 0; i < 20; i++) {
    const start = performance.now();
    const res = await fetch(`${proxy.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "demo", max_tokens: 1, messages: [{ role: "user", content: "hi" }],
                             demo: { ttft_ms: 0 } }),
    });
    assert.equal(res.status, 200);
    await res.text();
    slowest.push(performance.now() - start);
  }
  assert.ok(Math.max(...slowest) < 1000, `slowest request ${Math.max(...slowest)} ms`);
  for (const s of sockets) s.destroy();
});
