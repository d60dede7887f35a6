// The time to resume: streams each cut once mid-answer (the demo engine
// resets the connection after `--cut` tokens, once per stream), resumed by
// tokengate in restart and in prefill mode. For each stream the client
// measures the gap around the cut (the last token before it to the first
// after it) against the stream's usual gap between tokens, and checks it
// read the whole answer. Prints p50 / p99 per mode, and the proxy's own
// tokengate_stream_time_to_resume_seconds count.
//
// Usage: node tests/bench/resume.mjs BIN [STREAMS] [CONCURRENCY]
// (default 200 streams, 16 at once; 60 tokens 10 ms apart, cut after 40,
// 50 ms to the first token: an engine's pace, so that a restart's catch-up
// shows for what it costs).
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const bin = process.argv[2];
const streams = Number(process.argv[3] ?? 200);
const concurrency = Number(process.argv[4] ?? 16);
const tokens = 60, cut = 40, intervalMs = 10, ttftMs = 50;
if (!bin) throw new Error("usage: resume.mjs BIN [STREAMS] [CONCURRENCY]");

const children = [];
const work = mkdtempSync(join(tmpdir(), "tokengate-resume-bench-"));
function start(args, pattern) {
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let seen = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args[0]} did not start:\n${seen}`)), 10000);
    const onData = (d) => {
      seen += d;
      const m = seen.match(pattern);
      if (m) {
        clearTimeout(timer);
        child.stdout.off("data", onData);
        child.stderr.off("data", onData);
        child.stdout.resume();
        child.stderr.resume();
        resolve(m[1]);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
  });
}

const pctl = (xs, q) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

// One stream: its text, and the arrival time of each content chunk.
async function stream(port, model, demo) {
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-demo": JSON.stringify(demo) },
    body: JSON.stringify({ model, stream: true, messages: [{ role: "user", content: "hi" }] }),
  });
  const decoder = new TextDecoder();
  let text = "", buffered = "", finished = false;
  const times = [];
  for await (const bytes of res.body) {
    const now = performance.now();
    buffered += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (!event.startsWith("data: {")) continue;
      const chunk = JSON.parse(event.slice(6));
      const content = chunk.choices?.[0]?.delta?.content;
      if (content) {
        text += content;
        times.push(now);
      }
      if (chunk.choices?.[0]?.finish_reason) finished = true;
    }
  }
  return { text, times, finished };
}

async function run(port, model, faulty) {
  const gaps = [], usual = [];
  let whole = 0, next = 0;
  const expected = (await stream(port, model, { tokens, interval_ms: 0, ttft_ms: 0, run: "expected" })).text;
  async function worker() {
    while (next < streams) {
      const i = next++;
      const demo = { tokens, interval_ms: intervalMs, ttft_ms: ttftMs, run: `${model}-${i}` };
      if (faulty) Object.assign(demo, { reset_after: cut, fail_times: 1 });
      const got = await stream(port, model, demo);
      if (got.finished && got.text === expected) whole++;
      if (got.times.length > cut) gaps.push(got.times[cut] - got.times[cut - 1]);
      for (let k = 1; k < got.times.length; k++) if (k !== cut) usual.push(got.times[k] - got.times[k - 1]);
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { gaps, usual, whole };
}

async function resumesCounted(adminPort, route) {
  const page = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const line = page.split("\n").find((l) =>
    l.startsWith(`tokengate_stream_time_to_resume_seconds_count{route="${route}"`));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

try {
  const enginePort = await start(["demo-engine", "--port", "0"], /PORT (\d+)/);
  const config = join(work, "tokengate.yaml");
  writeFileSync(config, [
    "log_level: info",  // (the lines that name the ports)
    "listeners: [{name: main, address: 127.0.0.1, port: 0, upstream: demo}]",
    `upstreams: {demo: {base_url: "http://127.0.0.1:${enginePort}/v1"}}`,
    "admin: {address: 127.0.0.1, port: 0}",
    "routes:",
    "  - {name: restart, models: [restart], targets: [{upstream: demo, model: demo}],",
    "     retry_backoff: 1ms, resume: {mode: restart}}",
    "  - {name: prefill, models: [prefill], targets: [{upstream: demo, model: demo}],",
    "     retry_backoff: 1ms, resume: {mode: prefill}}",
    "",
  ].join("\n"));
  const proxy = spawn(bin, ["serve", "-c", config], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(proxy);
  let seen = "";
  const ports = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${seen}`)), 10000);
    const onData = (d) => {
      seen += d;
      const p = seen.match(/listening on http:\/\/127\.0\.0\.1:(\d+)\/v1/);
      const a = seen.match(/metrics at http:\/\/127\.0\.0\.1:(\d+)\/metrics/);
      if (p && a) {
        clearTimeout(timer);
        proxy.stdout.resume();
        proxy.stderr.resume();
        resolve({ port: p[1], admin: a[1] });
      }
    };
    proxy.stdout.on("data", onData);
    proxy.stderr.on("data", onData);
  });
  console.log(`${streams} streams per mode, ${concurrency} at once; ${tokens} tokens ${intervalMs} ms apart, ` +
    `first after ${ttftMs} ms, cut after ${cut}`);
  console.log("mode      cut   whole  gap at the cut p50 / p99 ms  usual gap p50 / p99 ms  proxy count");
  for (const mode of ["restart", "prefill"]) {
    for (const faulty of [false, true]) {
      const r = await run(ports.port, mode, faulty);
      const count = faulty ? await resumesCounted(ports.admin, mode) : "";
      console.log(`${mode.padEnd(9)} ${(faulty ? "yes" : "no").padEnd(5)} ${String(r.whole).padStart(5)}  ` +
        `${pctl(r.gaps, 0.5).toFixed(1).padStart(13)} / ${pctl(r.gaps, 0.99).toFixed(1).padEnd(10)} ` +
        `${pctl(r.usual, 0.5).toFixed(1).padStart(11)} / ${pctl(r.usual, 0.99).toFixed(1).padEnd(9)} ${count}`);
    }
  }
} finally {
  for (const child of children.reverse()) child.kill("SIGTERM");
  rmSync(work, { recursive: true, force: true });
}
