// The fleet benchmark: three demo engines in the realistic mode (4 slots
// each, continuous batching, a prefix cache) behind three front ends in
// turn, under open-loop Poisson arrivals at 0.5×, 1×, 1.5× and 2× the
// fleet's capacity:
//   tokengate (fastest) balance: fastest (each replica's predicted TTFT
//                       from its prefix index and learned rates) + queue,
//   tokengate (fastest, two instances) the same on two instances sharing
//                       their index through a redis-server, the client
//                       sending to each in turn (a round robin),
//   tokengate (fleet)   least loaded + prefix affinity + admission queue,
//   tokengate (random)  weighted random, no capacity declared,
//   nginx least_conn.
// The mix: short chats, multi-turn conversations that resend their
// history, and 3,000-token prompts. Reported per front end and load:
// goodput (requests per second that finish with TTFT <= 2 s and their
// own inter-token p99 <= 200 ms), TTFT p50/p90/p99 of the answered
// requests, refusals (429/503), how often a conversation's follow-up turn
// found its history in the engine's prefix cache, the share of the
// follow-ups' prompt tokens that were cached, and for balance: fastest
// the share of predictions within 25 % of the actual TTFT (its /metrics).
//
//   node tests/bench/fleet.mjs build/tokengate [SECONDS_PER_RUN]
//
// FLEET_WORKLOAD=tenants: instead, 20 tenants each sharing a 6,000-token
// document among 5 users who ask short questions (each engine's KV holds
// 80,000 tokens: the 120,000 of the documents need more than one replica's). FLEET_LOADS
// (default 0.5,1,1.5,2) and FLEET_FRONTS (default all five) narrow a run;
// FLEET_REPEATS=3 runs each three times and reports the medians;
// FLEET_PREFILL_BUDGET=N gives the fastest fronts capacity.max_prefill_tokens;
// FLEET_CHUNKED=N runs the engines with chunked prefill of N tokens a step.
//
// Engines are restarted for every run, so no run inherits another's cache.
import { spawn } from "node:child_process";
import { createServer, Agent, request } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const bin = process.argv[2] || "build/tokengate";
const seconds = Number(process.argv[3] || 30);
const work = mkdtempSync(join(tmpdir(), "fleet-bench-"));
const slotsPerEngine = 4, engines = 3;
const decodeTps = 25, maxTokens = 32;
const tenants = process.env.FLEET_WORKLOAD === "tenants";
const loads = (process.env.FLEET_LOADS || "0.5,1,1.5,2").split(",").map(Number);
const fronts = (process.env.FLEET_FRONTS ||
  "tokengate-fastest,tokengate-fastest-2,tokengate-fleet,tokengate-random,nginx").split(",");
const repeats = Number(process.env.FLEET_REPEATS || 1);
const prefillBudget = Number(process.env.FLEET_PREFILL_BUDGET || 0);
const chunked = Number(process.env.FLEET_CHUNKED || 0);
const kvTokens = tenants ? 80000 : 0;
const slo = { ttftMs: 2000, gapMs: 200 };
const children = [];
process.on("exit", () => children.forEach((c) => c.kill("SIGKILL")));

const freePort = () => new Promise((resolve) => {
  const s = createServer().listen(0, "127.0.0.1", () => {
    const { port } = s.address();
    s.close(() => resolve(port));
  });
});

function launch(path, args, ready) {
  const child = spawn(path, args, { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let seen = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${path} did not start:\n${seen}`)), 10000);
    const onData = (d) => {
      seen += d;
      if (ready.test(seen)) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
  });
}

async function startEngines() {
  const ports = [];
  for (let i = 0; i < engines; i++) {
    const port = await freePort();
    await launch(bin, ["demo-engine", "--port", String(port), "--slots", String(slotsPerEngine),
      "--decode-tps", String(decodeTps), ...(kvTokens ? ["--kv-tokens", String(kvTokens)] : []),
      ...(chunked ? ["--chunked-prefill-tokens", String(chunked)] : [])], /PORT \d+/);
    ports.push(port);
  }
  return ports;
}

// (Two instances in front of one fleet each declare half its slots: each
// counts only its own streams.)
const upstreamsYaml = (ports, fleet, fastest, instances = 1) => ports.map((p, i) => `  e${i + 1}:
    base_url: "http://127.0.0.1:${p}/v1"
    pool_size: 64${fleet ? `
    capacity: {max_streams: ${slotsPerEngine / instances}${kvTokens ? `, kv_tokens: ${kvTokens}` : ""}${
      fastest && prefillBudget ? `, max_prefill_tokens: ${prefillBudget}` : ""}}
    health_check: {path: /health, interval: 1s, timeout: 500ms}` : ""}`).join("\n");

const routeYaml = {
  "tokengate-fastest": "balance: fastest\n    queue: {max_waiting: 256, timeout: 1500ms}",
  "tokengate-fastest-2": "balance: fastest\n    queue: {max_waiting: 256, timeout: 1500ms}",
  "tokengate-fleet": "affinity: {max_load_ratio: 1.5, hold: 500ms}\n    queue: {max_waiting: 256, timeout: 1500ms}",
  "tokengate-random": "balance: weighted_random",
};
const tokengateYaml = (port, admin, ports, kind, redisPort) => `log_level: warn
workers: 1
listeners: [{name: main, address: 127.0.0.1, port: ${port}}]
admin: {address: 127.0.0.1, port: ${admin}}${redisPort ? `
redis: {url: "redis://127.0.0.1:${redisPort}", timeout: 500ms}` : ""}
upstreams:
${upstreamsYaml(ports, kind !== "tokengate-random", kind.startsWith("tokengate-fastest"), redisPort ? 2 : 1)}
routes:
  - name: fleet
    models: [fleet-model]
    targets: [${ports.map((_, i) => `{upstream: e${i + 1}}`).join(", ")}]
    ${routeYaml[kind]}
`;

const nginxConf = (port, ports) => `worker_processes 1;
pid ${work}/nginx.pid;
error_log ${work}/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_max_body_size 16m;
  upstream fleet { least_conn; ${ports.map((p) => `server 127.0.0.1:${p};`).join(" ")} keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://fleet;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 120s;
    }
  }
}
`;

// A front end: the ports the client sends to in turn, and the admin ports
// whose /metrics say how the predictions went.
async function startFrontEnd(kind, ports) {
  const port = await freePort();
  if (kind === "nginx") {
    const conf = join(work, "nginx.conf");
    writeFileSync(conf, nginxConf(port, ports));
    const child = spawn("/usr/sbin/nginx", ["-c", conf, "-g", "daemon off;"], { stdio: "ignore" });
    children.push(child);
    await new Promise((r) => setTimeout(r, 500));
    return { ports: [port], admins: [] };
  }
  let redisPort = 0;
  if (kind === "tokengate-fastest-2") {
    redisPort = await freePort();
    await launch("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "",
      "--appendonly", "no"], /Ready to accept/);
  }
  const front = { ports: [], admins: [] };
  for (let i = 0; i < (redisPort ? 2 : 1); i++) {
    const listen = i === 0 ? port : await freePort(), admin = await freePort();
    const conf = join(work, `${kind}-${i}.yaml`);
    writeFileSync(conf, tokengateYaml(listen, admin, ports, kind, redisPort));
    await launch(bin, ["serve", "-c", conf], /Send requests to/);
    front.ports.push(listen);
    front.admins.push(admin);
  }
  return front;
}

// Every 250 ms: whether a replica sat idle (nothing running) while
// requests waited (in an engine's queue, or in tokengate's).
function idleSampler(enginePorts, admins) {
  const gauge = (page, name) => [...page.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.]+)`, "gm"))]
    .reduce((a, m) => a + Number(m[1]), 0);
  const read = (port) => fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text(), () => "");
  const counts = { samples: 0, idleWhileWaiting: 0 };
  const timer = setInterval(async () => {
    const engines = await Promise.all(enginePorts.map(read));
    const fronts = await Promise.all(admins.map(read));
    const idle = engines.some((p) => gauge(p, "vllm:num_requests_running") === 0);
    const waiting = engines.some((p) => gauge(p, "vllm:num_requests_waiting") > 0) ||
      fronts.some((p) => gauge(p, "tokengate_admission_queue_length") > 0);
    counts.samples++;
    if (idle && waiting) counts.idleWhileWaiting++;
  }, 250);
  return { counts, stop: () => clearInterval(timer) };
}

// The predictions within 25 % of the actual TTFT, and how many were made.
async function predictions(admins) {
  let within = 0, count = 0;
  for (const admin of admins) {
    const page = await fetch(`http://127.0.0.1:${admin}/metrics`).then((r) => r.text(), () => "");
    const bucket = page.match(/tokengate_fleet_ttft_prediction_error_bucket\{le="0.25"\} (\d+)/);
    const total = page.match(/tokengate_fleet_ttft_prediction_error_count (\d+)/);
    if (bucket && total) {
      within += Number(bucket[1]);
      count += Number(total[1]);
    }
  }
  return { within, count };
}

// --- The load: what each arrival asks for.
const words = (n, seed) => Array.from({ length: n }, (_, i) => `w${(i * 7919 + seed) % 1000}`).join(" ");
// Each conversation has its own system prompt (a user's instructions and
// context): only its own replica can have its start cached.
const systemFor = (n) => `You are assistant ${n} of the fleet benchmark. ` + words(120, n * 31 + 7);
const conversations = [];  // {messages, busy}
// The tenants workload: 20 documents of about 6,000 tokens, each asked
// about by its 5 users in turn.
const documentFor = (t) => `Tenant ${t}'s handbook. ` + words(4800, t * 7919 + 3);
const tenantAsked = new Set();
function tenantRequest(rng) {
  const tenant = Math.floor(rng() * 20), user = Math.floor(rng() * 5);
  const followUp = tenantAsked.has(tenant);
  tenantAsked.add(tenant);
  return { kind: "tenant", followUp, messages: [{ role: "system", content: documentFor(tenant) },
    { role: "user", content: `user ${user}: ` + words(20, Math.floor(rng() * 1e6)) }] };
}

function nextRequest(rng) {
  if (tenants) return tenantRequest(rng);
  const r = rng();
  if (r < 0.5) return { kind: "short", messages: [{ role: "user", content: words(40, Math.floor(rng() * 1e6)) }] };
  if (r < 0.85) {
    let c = conversations.find((x) => !x.busy && x.turns < 6);
    if (!c || rng() < 0.15) {
      c = { turns: 0, busy: false, messages: [{ role: "system", content: systemFor(conversations.length) },
        { role: "user", content: `conversation ${conversations.length}: ` + words(60, conversations.length) }] };
      conversations.push(c);
    } else {
      c.messages.push({ role: "user", content: `turn ${c.turns}: ` + words(30, c.turns) });
    }
    c.busy = true;
    return { kind: "conversation", conversation: c, followUp: c.turns > 0, messages: c.messages };
  }
  return { kind: "long", messages: [{ role: "user", content: words(2400, Math.floor(rng() * 1e6)) }] };  // ~3,000 tokens
}

function send(agent, port, job) {
  const body = JSON.stringify({ model: "fleet-model", stream: true, max_tokens: maxTokens,
    stream_options: { include_usage: true }, messages: job.messages });
  const start = performance.now();
  return new Promise((resolve) => {
    const result = { kind: job.kind, followUp: job.followUp, status: 0, ttft: null, gaps: [], cached: 0, prompt: 0,
      text: "" };
    const req = request({ host: "127.0.0.1", port, path: "/v1/chat/completions", method: "POST", agent,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      result.status = res.statusCode;
      let last = null, pending = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        pending += chunk;
        let cut;
        while ((cut = pending.indexOf("\n\n")) >= 0) {
          const event = pending.slice(0, cut);
          pending = pending.slice(cut + 2);
          const now = performance.now();
          if (event.includes('"content":"')) {
            if (result.ttft === null) result.ttft = now - start;
            else result.gaps.push(now - last);
            last = now;
            const m = event.match(/"content":"([^"]*)"/);
            if (m) result.text += m[1];
          }
          const cached = event.match(/"cached_tokens":(\d+)/);
          if (cached) result.cached = Number(cached[1]);
          const prompt = event.match(/"prompt_tokens":(\d+)/);
          if (prompt) result.prompt = Number(prompt[1]);
        }
      });
      res.on("end", () => resolve(result));
      res.on("error", () => resolve(result));
    });
    req.setTimeout(120000, () => req.destroy());
    req.on("error", () => resolve(result));
    req.end(body);
  });
}

const quantile = (xs, q) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
};

async function run(kind, load, capacity) {
  const ports = await startEngines();
  const front = await startFrontEnd(kind, ports);
  conversations.length = 0;
  tenantAsked.clear();
  let seed = 12345;
  const rng = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
  const rate = load * capacity, results = [], inflight = [];
  const sampler = idleSampler(ports, front.admins);
  const began = performance.now();
  let next = began;
  while (next - began < seconds * 1000) {
    next += -Math.log(1 - rng()) / rate * 1000;  // Poisson: exponential gaps
    const wait = next - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const job = nextRequest(rng);
    inflight.push(send(agent, front.ports[results.length % front.ports.length], job).then((r) => {
      if (job.conversation) {
        job.conversation.busy = false;
        job.conversation.turns++;
        job.conversation.messages.push({ role: "assistant", content: r.text || "ok" });
      }
      results.push(r);
    }));
  }
  await Promise.all(inflight);
  sampler.stop();
  agent.destroy();
  const predicted = await predictions(front.admins);
  children.splice(0).forEach((c) => c.kill("SIGKILL"));
  await new Promise((r) => setTimeout(r, 300));
  const answered = results.filter((r) => r.status === 200 && r.ttft !== null);
  const good = answered.filter((r) => r.ttft <= slo.ttftMs && (quantile(r.gaps, 0.99) || 0) <= slo.gapMs);
  const followUps = answered.filter((r) => r.followUp);
  return {
    front: kind, load, sent: results.length,
    goodput: good.length / seconds,
    ttft50: quantile(answered.map((r) => r.ttft), 0.5),
    ttft90: quantile(answered.map((r) => r.ttft), 0.9),
    ttft99: quantile(answered.map((r) => r.ttft), 0.99),
    refused: results.filter((r) => r.status === 429 || r.status === 503).length,
    failed: results.filter((r) => r.status !== 200 && r.status !== 429 && r.status !== 503).length,
    cacheHit: followUps.length ? followUps.filter((r) => r.cached > 0).length / followUps.length : NaN,
    cachedShare: followUps.reduce((a, r) => a + r.cached, 0) / Math.max(1, followUps.reduce((a, r) => a + r.prompt, 0)),
    predictedWithin25: predicted.count ? predicted.within / predicted.count : NaN,
    idleWhileWaiting: sampler.counts.idleWhileWaiting / Math.max(1, sampler.counts.samples),
  };
}

// Each metric's median over the repeats of one front end at one load.
function medianOf(runs) {
  const median = (xs) => quantile(xs.filter((x) => !Number.isNaN(x)), 0.5);
  const out = { ...runs[0] };
  for (const k of Object.keys(out)) if (typeof out[k] === "number" && k !== "load") out[k] = median(runs.map((r) => r[k]));
  return out;
}

async function main() {
  // A request holds a slot for its prefill plus maxTokens decode steps; a
  // full engine's step is 1000/decodeTps ms plus 0.4 ms per other sequence.
  const stepMs = 1000 / decodeTps + 0.4 * (slotsPerEngine - 1);
  const holdS = (maxTokens * stepMs + 20 + 0.05 * 700) / 1000;
  const cap = (slotsPerEngine * engines) / holdS;
  console.log(`fleet: ${engines} engines × ${slotsPerEngine} slots, a request holds one about ${holdS.toFixed(2)} s: ` +
    `capacity ≈ ${cap.toFixed(1)} requests/s; ${seconds} s per run`);
  const rows = [];
  const say = (r, what) => console.log(`${r.load}× ${r.front.padEnd(19)} ${what} sent ${String(r.sent).padStart(4)}  goodput ${r.goodput.toFixed(2)}/s  ` +
    `TTFT p50 ${r.ttft50.toFixed(0)} ms p90 ${r.ttft90.toFixed(0)} ms p99 ${r.ttft99.toFixed(0)} ms  refused ${r.refused}  failed ${r.failed}  ` +
    `follow-ups: history cached ${(r.cacheHit * 100).toFixed(0)} %, prompt tokens cached ${(r.cachedShare * 100).toFixed(0)} %` +
    (Number.isNaN(r.predictedWithin25) ? "" : `  predictions within 25 %: ${(r.predictedWithin25 * 100).toFixed(0)} %`) +
    `  a replica idle while requests waited: ${(r.idleWhileWaiting * 100).toFixed(1)} % of the time`);
  for (const load of loads)
    for (const kind of fronts) {
      const runs = [];
      for (let i = 0; i < repeats; i++) {
        runs.push(await run(kind, load, cap));
        if (repeats > 1) say(runs[i], `run ${i + 1}`);
      }
      rows.push(medianOf(runs));
      say(rows.at(-1), repeats > 1 ? "median" : "");
    }
  for (const load of loads) {
    const at = (k) => rows.find((r) => r.load === load && r.front === k);
    for (const k of ["tokengate-fastest", "tokengate-fastest-2", "tokengate-fleet"]) {
      if (!at(k) || !at("nginx")) continue;
      console.log(`${load}×: goodput ${k}/nginx ${(at(k).goodput / at("nginx").goodput).toFixed(2)}; ` +
        `TTFT p90 ${(at(k).ttft90).toFixed(0)} vs ${(at("nginx").ttft90).toFixed(0)} ms, ` +
        `p99 ${(at(k).ttft99).toFixed(0)} vs ${(at("nginx").ttft99).toFixed(0)} ms`);
    }
  }
  for (const load of loads) {
    const one = rows.find((r) => r.load === load && r.front === "tokengate-fastest");
    const two = rows.find((r) => r.load === load && r.front === "tokengate-fastest-2");
    if (one && two)
      console.log(`${load}×: prompt tokens cached, two instances / one ${(two.cachedShare / one.cachedShare).toFixed(2)}`);
  }
  writeFileSync("build/fleet-bench.json", JSON.stringify(rows, null, 2));
}

main().then(() => process.exit(0), (e) => {
  console.error(e);
  process.exit(1);
});
