// A bounded soak against the real binary: thousands of streams with random
// client aborts, slow readers and upstream faults (resets, 5xx, garbage,
// trickles), for SECONDS (argv[2], default 180). Afterwards the proxy must
// be back at its idle level: no stream, no client connection, file
// descriptors as before, and resident memory within a margin of the warm
// baseline (the allocator keeps some pages). Prints what it measured.
//   node tests/soak/soak.mjs [SECONDS] [CONCURRENCY]   (TOKENGATE_BIN=build/tokengate)
import { readFileSync, readdirSync } from "node:fs";
import { request } from "node:http";
import { startProxy } from "../e2e/harness.mjs";

const seconds = Number(process.argv[2] ?? 180);
const concurrency = Number(process.argv[3] ?? 64);
const proxy = await startProxy();
const url = new URL(`${proxy.baseURL}/chat/completions`);
const rssKb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proxy.pid}/status`, "utf8"))[1]);
const fds = () => readdirSync(`/proc/${proxy.pid}/fd`).length;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];

const counts = { ok: 0, aborted: 0, slow: 0, faults: 0, errors: 0 };
// Every request here ends within about a second (the longest: a drip, or a
// slow reader's pauses); one that takes 10 s waited for a timeout instead of
// an event the proxy missed (a reset or an end that was never read).
const slowestAllowedMs = 10000;
let slowest = { ms: 0, mode: "" };

// One request; `mode` decides how the client behaves and what the engine does.
function one(mode) {
  const demo = { ttft_ms: Math.floor(Math.random() * 20), interval_ms: 1 + Math.floor(Math.random() * 5),
                 tokens: 5 + Math.floor(Math.random() * 40) };
  if (mode === "reset") demo.reset_after = 3;
  if (mode === "status") demo.status = pick([500, 503, 429]);
  if (mode === "garbage") demo.garbage = true;
  if (mode === "drip") Object.assign(demo, { drip_ms: 1, tokens: 3 });
  const body = JSON.stringify({ model: "demo", stream: Math.random() < 0.9, max_tokens: 64,
                                messages: [{ role: "user", content: "soak " + "x".repeat(Math.random() * 2000) }], demo });
  return new Promise((resolve) => {
    const req = request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      if (mode === "abort") setTimeout(() => req.destroy(), Math.random() * 30);
      if (mode === "slow") {
        res.pause();
        setTimeout(() => res.resume(), 50 + Math.random() * 200);
      }
      res.on("data", () => {});
      res.on("end", () => resolve(res.statusCode === 200 ? "ok" : "faults"));
      res.on("error", () => resolve(mode === "abort" ? "aborted" : "errors"));
      res.on("aborted", () => resolve(mode === "abort" ? "aborted" : "faults"));
    });
    req.on("error", () => resolve(mode === "abort" ? "aborted" : "errors"));
    req.end(body);
  });
}

async function worker(until) {
  while (Date.now() < until) {
    const mode = pick(["normal", "normal", "normal", "abort", "slow", "reset", "status", "garbage", "drip"]);
    const started = Date.now();
    let outcome = await one(mode);
    if (Date.now() - started > slowest.ms) slowest = { ms: Date.now() - started, mode };
    if (["reset", "status", "garbage"].includes(mode) && outcome !== "errors") outcome = "faults";
    if (mode === "slow" && outcome === "ok") outcome = "slow";
    counts[outcome]++;
  }
}

// Warm up (pools, allocator arenas, metric label sets), then take the baseline.
await Promise.all(Array.from({ length: concurrency }, () => worker(Date.now() + 3000)));
await sleep(1500);
const base = { rss: rssKb(), fds: fds() };
for (const k of Object.keys(counts)) counts[k] = 0;

const start = Date.now();
await Promise.all(Array.from({ length: concurrency }, () => worker(start + seconds * 1000)));
const peak = { rss: rssKb(), fds: fds() };
// Idle: every stream finished or timed out; pooled upstream connections may stay.
let after = { rss: 0, fds: 0 };
for (let i = 0; i < 100; i++) {
  await sleep(100);
  after = { rss: rssKb(), fds: fds() };
  if (after.fds <= base.fds + 2) break;
}
const total = Object.values(counts).reduce((a, b) => a + b, 0);
console.log(JSON.stringify({ seconds, concurrency, requests: total, ...counts, slowest,
                             baseline: base, end_of_load: peak, idle_after: after }));
await proxy.stop();

let failed = false;
if (slowest.ms > slowestAllowedMs) { console.error(`FAIL: a ${slowest.mode} request took ${slowest.ms} ms`); failed = true; }
if (counts.errors > 0) { console.error(`FAIL: ${counts.errors} requests failed with a transport error`); failed = true; }
if (after.fds > base.fds + 2) { console.error(`FAIL: ${after.fds} descriptors after, ${base.fds} before`); failed = true; }
if (after.rss > base.rss + 16 * 1024) { console.error(`FAIL: RSS ${after.rss} kB after, ${base.rss} kB before`); failed = true; }
process.exit(failed ? 1 : 0);
