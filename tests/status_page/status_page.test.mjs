// The admin listener's status page in a real browser: Debian's chromium,
// headless, driven by puppeteer-core, against the real binary in front of
// two demo engines. Under load it checks that the page loads with no
// console error and no request leaving its origin, that its charts gain
// points, that a budget refusal shows on its key's bar, that a replica
// failed with the engine's /demo/fail turns unhealthy within its health
// check's interval, that it fits 1280 and 400 pixels, and (on a second
// proxy, with admin.token) that the token form guards the data and the
// token goes nowhere but the Authorization header. It writes a screenshot
// of the page under load to $STATUS_PAGE_SCREENSHOT (docs/status-page.png
// is one). Exit 77 (skipped) where no chromium is installed.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { printed } from "../e2e/harness.mjs";

const bin = process.env.TOKENGATE_BIN;
if (!bin) throw new Error("TOKENGATE_BIN must point at the tokengate binary");
const chromium = [process.env.CHROMIUM, "/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => p && existsSync(p));
if (!chromium) {
  console.log("status page: no chromium here (scripts/setup installs it); skipped");
  process.exit(77);
}
const { default: puppeteer } = await import("puppeteer-core");

const screenshot = process.env.STATUS_PAGE_SCREENSHOT || join(tmpdir(), "status-page.png");
const HEALTH_INTERVAL_MS = 500;
const ADMIN_TOKEN = "status-page-admin-token-7f3a";
const bigKey = "sk-status-page-load";
const smallKey = "sk-status-page-small";
const sha256 = (s) => createHash("sha256").update(s).digest("hex");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const children = [];
const dir = mkdtempSync(join(tmpdir(), "tokengate-status-page-"));

async function engine() {
  const child = spawn(bin, ["demo-engine", "--port", "0", "--decode-tps", "40", "--slots", "4"]);
  children.push(child);
  return Number((await printed(child, /^PORT (\d+)$/m, "demo engine port"))[1]);
}

// A proxy on `lines`: {port, admin} (its listener's and its admin's).
async function proxy(name, lines) {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, lines.join("\n") + "\n");
  const child = spawn(bin, ["serve", "-c", file]);
  children.push(child);
  const ports = await printed(child, /listening on http:\/\/127\.0\.0\.1:(\d+)\/v1[^]*metrics at http:\/\/127\.0\.0\.1:(\d+)\/metrics/, "ports");
  return { port: Number(ports[1]), admin: Number(ports[2]) };
}

// Where the proxy sends its spans (so that its requests have traces to
// link to): answers every export and keeps nothing.
async function collector() {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return server;
}

function config(engines, adminLines, more = []) {
  const upstream = (name, port) => [
    `  ${name}:`,
    `    base_url: http://127.0.0.1:${port}/v1`,
    `    health_check: {interval: ${HEALTH_INTERVAL_MS}ms, timeout: 400ms, unhealthy_after: 1, healthy_after: 1}`,
    "    engine_metrics: {path: /metrics, interval: 500ms}",
  ];
  return [
    "log_level: info", // (its start-up lines name the ports)
    "workers: 1",
    "listeners:",
    "  - {name: main, address: 127.0.0.1, port: 0}",
    "upstreams:",
    ...upstream("engine-a", engines[0]),
    ...upstream("engine-b", engines[1]),
    "routes:",
    "  - {name: chat, models: ['demo*'], targets: [{upstream: engine-a}, {upstream: engine-b}],",
    "     balance: least_loaded, max_output_tokens: {default: 24, ceiling: 32, mode: clamp}}",
    "keys:",
    `  - {name: load, sha256: ${sha256(bigKey)}}`,
    `  - {name: small-team, sha256: ${sha256(smallKey)}, budget: {requests_per_minute: 1}}`,
    "admin:",
    "  address: 127.0.0.1",
    "  port: 0",
    "  trace_url: https://tempo.example/trace/{trace_id}",
    ...adminLines,
    ...more,
  ];
}

function chat(port, key, maxTokens) {
  return fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: "demo", stream: true, max_tokens: maxTokens, messages: [{ role: "user", content: "hi" }] }),
  }).then(async (res) => {
    await res.text();
    return res.status;
  });
}

// Streams through the proxy, `streams` at a time, until stopped.
function load(port, streams) {
  let running = true;
  const loops = Array.from({ length: streams }, async (_, i) => {
    for (let n = 0; running; n++) await chat(port, bigKey, 16 + ((i * 7 + n * 5) % 20)).catch(() => {});
  });
  return async () => {
    running = false;
    await Promise.all(loops);
  };
}

// A page that records its console errors and every request it makes.
async function watchedPage(browser, width) {
  const page = await browser.newPage();
  await page.setViewport({ width, height: 900 });
  const seen = { errors: [], requests: [] };
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warn") seen.errors.push(`${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => seen.errors.push(`pageerror: ${e.message}`));
  page.on("request", (r) => seen.requests.push({ url: r.url(), method: r.method(), headers: r.headers() }));
  return { page, seen };
}

const until = async (page, fn, arg, what, timeout = 5000) => {
  try {
    return await page.waitForFunction(fn, { timeout, polling: 100 }, arg);
  } catch {
    throw new Error(`timed out waiting for ${what}`);
  }
};
const points = (page, index) => page.$$eval(".route[data-route=chat] .chart", (els, i) => Number(els[i].dataset.points || 0), index);

let browser, open, guarded, engines, stopLoad, spans;

before(async () => {
  engines = [await engine(), await engine()];
  spans = await collector();
  const tracing = [`tracing: {endpoint: "http://127.0.0.1:${spans.address().port}/v1/traces", export_interval: 1s}`];
  open = await proxy("open", config(engines, [], tracing));
  guarded = await proxy("guarded", config(engines, [`  token: ${ADMIN_TOKEN}`]));
  stopLoad = load(open.port, 4);
  browser = await puppeteer.launch({ executablePath: chromium, headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
});

after(async () => {
  if (stopLoad) await stopLoad();
  if (browser) await browser.close();
  for (const child of children.reverse()) child.kill("SIGTERM");
  if (spans) spans.close();
  rmSync(dir, { recursive: true, force: true });
});

test("under load: charts grow, a refusal shows on its key, a failed replica turns unhealthy", async () => {
  const origin = `http://127.0.0.1:${open.admin}`;
  const { page, seen } = await watchedPage(browser, 1280);
  await page.goto(`${origin}/`, { waitUntil: "load" });
  // (shown once the first snapshot arrives, after the page's load event)
  await until(page, () => !document.getElementById("unauthenticated").hidden, null, "the page saying its data is unauthenticated");

  await until(page, () => document.querySelector(".route[data-route=chat] .chart")?.dataset.points >= 2, null, "the chat route's charts");
  const ttft = await points(page, 0);
  await until(page, (n) => Number(document.querySelector(".route[data-route=chat] .chart").dataset.points) >= n + 2, ttft, "two more TTFT points");
  assert.ok((await points(page, 1)) >= 2, "the inter-token chart has points too");

  // The small key may send one request a minute: the next is refused, and
  // its bar says so.
  const statuses = [];
  for (let i = 0; i < 3 && !statuses.includes(429); i++) statuses.push(await chat(open.port, smallKey, 4));
  assert.ok(statuses.includes(429), `a refusal among ${statuses}`);
  await until(page, () => {
    const bar = document.querySelector(".budget[data-name=small-team]");
    return bar && Number(bar.dataset.refusals) >= 1 && bar.classList.contains("refused") && /refused/.test(bar.textContent);
  }, null, "the refusal on small-team's bar");
  await until(page, () => /refused rate_limit_exceeded/.test(document.querySelector(".route[data-route=chat] .tally").textContent), null, "the refusal in the chat route's tally");

  // Slow requests carry their trace link, through admin.trace_url.
  const link = await page.$eval("#slowest a", (a) => a.href);
  assert.match(link, /^https:\/\/tempo\.example\/trace\/[0-9a-f]{32}$/);

  // (A few seconds more of history for the picture.)
  await until(page, () => Number(document.querySelector(".route[data-route=chat] .chart").dataset.points) >= 8, null, "8 TTFT points", 10000);
  await page.screenshot({ path: screenshot, fullPage: true });

  // A replica fails: its check sees it at the next interval, the page a
  // feed's second later.
  await until(page, () => document.querySelector("tr[data-upstream=engine-b]")?.dataset.health === "healthy", null, "engine-b healthy");
  const failed = Date.now();
  await fetch(`http://127.0.0.1:${engines[1]}/demo/fail`, { method: "POST", body: '{"status":503}' });
  await until(page, () => document.querySelector("tr[data-upstream=engine-b]").dataset.health === "unhealthy", null, "engine-b unhealthy", HEALTH_INTERVAL_MS + 2500);
  const shownAfter = Date.now() - failed;
  console.log(`engine-b shown unhealthy ${shownAfter} ms after it failed (checks every ${HEALTH_INTERVAL_MS} ms, the feed every 1000 ms)`);
  assert.ok(shownAfter <= HEALTH_INTERVAL_MS + 1000 + 1000, `shown after ${shownAfter} ms`);
  assert.equal(await page.$eval("tr[data-upstream=engine-a]", (e) => e.dataset.health), "healthy");
  await fetch(`http://127.0.0.1:${engines[1]}/demo/fail`, { method: "POST", body: '{"status":0}' });

  // 400 pixels wide: nothing wider than the screen, the charts follow.
  await page.setViewport({ width: 400, height: 900 });
  await until(page, () => document.querySelector(".route .chart canvas").getBoundingClientRect().width <= 400, null, "charts at 400 px");
  const widths = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, view: window.innerWidth }));
  assert.ok(widths.page <= widths.view, `the page is ${widths.page} px wide in ${widths.view}`);

  assert.deepEqual(seen.errors, [], "no console error");
  const elsewhere = seen.requests.filter((r) => new URL(r.url).origin !== origin && !r.url.startsWith("data:"));
  assert.deepEqual(elsewhere.map((r) => r.url), [], "no request leaves the admin origin");
  assert.deepEqual([...new Set(seen.requests.map((r) => r.method))], ["GET"], "GET only");
  await page.close();
});

test("with admin.token: the form guards the data, the token stays in a header", async () => {
  const origin = `http://127.0.0.1:${guarded.admin}`;
  const { page, seen } = await watchedPage(browser, 1280);
  await page.goto(`${origin}/`, { waitUntil: "load" });
  await until(page, () => !document.getElementById("login").hidden, null, "the token form");
  assert.equal(await page.$eval("#data", (e) => e.hidden), true, "no data before the token");
  assert.equal(await page.$$eval(".route", (e) => e.length), 0);

  await page.type("#token", "not-the-token");
  await page.click("#login button");
  await until(page, () => /refused/.test(document.getElementById("login-error").textContent), null, "a wrong token refused");
  assert.equal(await page.$eval("#data", (e) => e.hidden), true);

  await page.type("#token", ADMIN_TOKEN);
  await page.click("#login button");
  await until(page, () => !document.getElementById("data").hidden && document.querySelectorAll("tr[data-upstream]").length === 2, null, "the data");
  await until(page, () => document.querySelector(".budget[data-name=small-team]"), null, "the budgets");
  assert.equal(await page.$eval("#unauthenticated", (e) => e.hidden), true);
  assert.equal(await page.$eval("#token", (e) => e.value), "", "the field is emptied");

  const kept = await page.evaluate(() => JSON.stringify({ local: { ...localStorage }, session: { ...sessionStorage }, cookie: document.cookie }));
  assert.ok(!kept.includes(ADMIN_TOKEN), `kept nowhere: ${kept}`);
  assert.deepEqual(await page.cookies(), []);
  for (const r of seen.requests) assert.ok(!r.url.includes(ADMIN_TOKEN), `not in a URL: ${r.url}`);
  const feed = seen.requests.filter((r) => r.url === `${origin}/stats/stream`);
  assert.ok(feed.length >= 1);
  assert.equal(feed.at(-1).headers.authorization, `Bearer ${ADMIN_TOKEN}`);
  // (Chromium reports each 401 the page was answered as a console error:
  // the probe before the form, and the wrong token. Nothing else.)
  assert.deepEqual(seen.errors.filter((e) => !/status of 401/.test(e)), [], "no other console error");
  await page.close();
});
