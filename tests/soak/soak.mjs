// A bounded soak against the real binary: thousands of streams with random
// client aborts, slow readers and upstream faults (resets, 5xx, garbage,
// trickles), for SECONDS (argv[2], default 180). Afterwards the proxy must
// be back at its idle level: no stream, no client connection, file
// descriptors as before, and resident memory within a margin of the warm
// baseline (the allocator keeps some pages). Prints what it measured.
//   node tests/soak/soak.mjs [SECONDS] [CONCURRENCY]   (TOKENGATE_BIN=build/tokengate)
// SOAK_MEMORY_CHECK=0 leaves the resident memory unchecked (AddressSanitizer
// keeps freed memory on purpose; its leak check runs at the proxy's exit).
// SOAK_TLS=1: TLS on both sides, as in production in front of a hosted
// provider: the clients speak https to the proxy, and the proxy reaches the
// engine through a TLS terminator (a second tokengate), so that every
// fault, abort and slow read goes through OpenSSL on both of its sides.
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeCertificate, startProxy } from "../e2e/harness.mjs";

const seconds = Number(process.argv[2] ?? 180);
const concurrency = Number(process.argv[3] ?? 64);
const tls = process.env.SOAK_TLS === "1";
let certificate, certDir;
if (tls) {
  certDir = mkdtempSync(join(tmpdir(), "tokengate-soak-"));
  certificate = makeCertificate(certDir);
}
const proxy = await startProxy(tls ? { tls: certificate, upstreamTls: certificate } : {});
const url = new URL(`${proxy.baseURL}/chat/completions`);
const ca = tls ? readFileSync(certificate.cert) : undefined;
const request = tls ? (u, o, cb) => httpsRequest(u, { ...o, ca }, cb) : httpRequest;
const rssKb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proxy.pid}/status`, "utf8"))[1]);
const fds = () => readdirSync(`/proc/${proxy.pid}/fd`).length;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];

// unexpected: a request of a mode where nothing goes wrong (normal, slow
// reader, drip) that did not end with a 200 and, when streamed, [DONE]: a
// proxy or terminator that failed would otherwise pass as an upstream fault.
const counts = { ok: 0, aborted: 0, slow: 0, faults: 0, errors: 0, unexpected: 0 };
let firstUnexpected = null;
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
  const streamed = Math.random() < 0.9;
  const body = JSON.stringify({ model: "demo", stream: streamed, max_tokens: 64,
                                messages: [{ role: "user", content: "soak " + "x".repeat(Math.random() * 2000) }], demo });
  return new Promise((resolve) => {
    const req = request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      if (mode === "abort") setTimeout(() => req.destroy(), Math.random() * 30);
      if (mode === "slow") {
        res.pause();
        setTimeout(() => res.resume(), 50 + Math.random() * 200);
      }
      let tail = "";  // the end of the body, where [DONE] is
      res.on("data", (data) => { tail = (tail + data.toString()).slice(-64); });
      res.on("end", () => {
        if (res.statusCode !== 200) resolve(`faults: status ${res.statusCode}`);
        else resolve(streamed && !tail.includes("data: [DONE]") ? `faults: no [DONE] after ${JSON.stringify(tail)}` : "ok");
      });
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
    if (["normal", "slow", "drip"].includes(mode) && outcome !== "ok" && outcome !== "errors") {
      firstUnexpected ??= `${mode}: ${outcome}`;
      outcome = "unexpected";
    }
    if (outcome.startsWith("faults")) outcome = "faults";
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
firstUnexpected = null;

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
console.log(JSON.stringify({ seconds, concurrency, tls, requests: total, ...counts, slowest,
                             baseline: base, end_of_load: peak, idle_after: after }));
// Every process must stop cleanly (under AddressSanitizer a leak found at
// the exit fails it).
const ends = await proxy.stop();
if (certDir) rmSync(certDir, { recursive: true, force: true });

let failed = false;
if (slowest.ms > slowestAllowedMs) { console.error(`FAIL: a ${slowest.mode} request took ${slowest.ms} ms`); failed = true; }
for (const end of ends.filter((e) => e.code !== 0)) { console.error(`FAIL: ${JSON.stringify(end)} on SIGTERM`); failed = true; }
if (counts.unexpected > 0) { console.error(`FAIL: ${counts.unexpected} requests that should have succeeded did not; the first: ${firstUnexpected}`); failed = true; }
if (counts.errors > 0) { console.error(`FAIL: ${counts.errors} requests failed with a transport error`); failed = true; }
if (after.fds > base.fds + 2) { console.error(`FAIL: ${after.fds} descriptors after, ${base.fds} before`); failed = true; }
if (process.env.SOAK_MEMORY_CHECK !== "0" && after.rss > base.rss + 16 * 1024) { console.error(`FAIL: RSS ${after.rss} kB after, ${base.rss} kB before`); failed = true; }
process.exit(failed ? 1 : 0);
