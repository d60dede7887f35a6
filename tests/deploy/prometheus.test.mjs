// deploy/prometheus and deploy/grafana against the real thing: promtool
// checks the config and the rules and runs their unit tests; then a real
// Prometheus scrapes a real tokengate carrying streams, evaluates the
// recording rules, and answers every query of the Grafana dashboard. So a
// renamed metric or a broken expression fails here, not on an ops screen.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const bin = process.env.TOKENGATE_BIN ?? path.join(root, 'build/tokengate');
const rulesFile = path.join(root, 'deploy/prometheus/rules/tokengate.rules.yml');
const dashboard = JSON.parse(readFileSync(path.join(root, 'deploy/grafana/tokengate-dashboard.json'), 'utf8'));
const work = mkdtempSync(path.join(tmpdir(), 'tg-prom-'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const children = [];

function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function start(cmd, args, ready) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let seen = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${cmd} did not start:\n${seen}`)), 15000);
    const onData = (d) => {
      seen += d;
      const m = seen.match(ready);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => reject(new Error(`${cmd} exited ${code}:\n${seen}`)));
  });
}

let proxy, admin, prometheus;
let traffic = true;

async function stream(model) {
  const res = await fetch(`http://127.0.0.1:${proxy}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream: true, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }],
                           demo: { ttft_ms: 30, interval_ms: 5 } }),
  });
  await res.text();
  return res.status;
}

before(async () => {
  const enginePort = await freePort();
  const config = readFileSync(path.join(root, 'config/tokengate.yaml'), 'utf8')
    .replace(/^(\s*)port: (8080|9090)/gm, '$1port: 0')
    .replaceAll('9901', String(enginePort)) +
    // A budget store named (never asked: no key has a budget), so that the
    // budget store's series the rules use are exposed.
    '\nredis: {url: "redis://127.0.0.1:9", on_store_failure: allow_local}\n' +
    // And a trace exporter (sampling nothing), so that its series are too.
    'tracing: {endpoint: "http://127.0.0.1:9/v1/traces", sampling_ratio: 0}\n';
  writeFileSync(path.join(work, 'tokengate.yaml'), config);
  const m = await start(bin, ['serve', '-c', path.join(work, 'tokengate.yaml')],
                        /tokengate \S+ listening on http:\/\/[\d.]+:(\d+)[\s\S]*metrics at http:\/\/[\d.]+:(\d+)/);
  [proxy, admin] = [m[1], m[2]];

  // Real traffic for the whole test: streams on two routes and a 404.
  (async () => {
    while (traffic) {
      await Promise.all([stream('demo'), stream('fast'), stream('no-such-model')]).catch(() => {});
      await sleep(20);
    }
  })();

  // Prometheus scraping every second, with the rule groups evaluated every second.
  writeFileSync(path.join(work, 'rules.yml'), readFileSync(rulesFile, 'utf8').replace(/interval: 30s/g, 'interval: 1s'));
  writeFileSync(path.join(work, 'prometheus.yml'), [
    'global: {scrape_interval: 1s, evaluation_interval: 1s}',
    'rule_files: [rules.yml]',
    'scrape_configs:',
    `  - {job_name: tokengate, static_configs: [{targets: ["127.0.0.1:${admin}"]}]}`,
  ].join('\n'));
  const promPort = await freePort();
  prometheus = `http://127.0.0.1:${promPort}`;
  await start('prometheus', [`--config.file=${path.join(work, 'prometheus.yml')}`,
    `--storage.tsdb.path=${path.join(work, 'data')}`, `--web.listen-address=127.0.0.1:${promPort}`,
    '--log.level=info'], /Server is ready to receive web requests/);
});

after(() => {
  traffic = false;
  for (const c of children) c.kill('SIGKILL');
  // (Prometheus, killed, may still be writing its data directory: retried.)
  rmSync(work, { recursive: true, force: true, maxRetries: 5 });
});

async function query(expr) {
  const res = await fetch(`${prometheus}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = await res.json();
  assert.equal(body.status, 'success', `${expr}: ${body.error}`);
  return body.data.result;
}

// Polls until the expression has a sample (rates need two scrapes).
async function eventually(expr, seconds = 25) {
  for (let i = 0; i < seconds * 4; i++) {
    const result = await query(expr);
    if (result.length > 0) return result;
    await sleep(250);
  }
  assert.fail(`no data for ${expr} after ${seconds}s`);
}

test('promtool: config, rules and the rules unit tests', () => {
  execFileSync('promtool', ['check', 'config', path.join(root, 'deploy/prometheus/prometheus.yml')], { stdio: 'pipe' });
  execFileSync('promtool', ['check', 'rules', rulesFile], { stdio: 'pipe' });
  const out = execFileSync('promtool', ['test', 'rules', path.join(root, 'tests/deploy/prometheus/rules_test.yml')],
                           { encoding: 'utf8' });
  assert.match(out, /SUCCESS/);
});

test('every metric the rules and the dashboard use is exposed by tokengate', async () => {
  const exposed = await (await fetch(`http://127.0.0.1:${admin}/metrics`)).text();
  const names = new Set([...exposed.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]));
  const used = (text) => [...text.matchAll(/\btokengate_[a-z_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, ''));
  const referenced = new Set([...used(readFileSync(rulesFile, 'utf8')), ...used(JSON.stringify(dashboard))]);
  // Recording-rule names contain "tokengate_" after a "route:" prefix; keep only raw metrics.
  const recorded = new Set([...readFileSync(rulesFile, 'utf8').matchAll(/record: route:(tokengate_[a-z_]+):/g)].map((m) => m[1]));
  for (const name of referenced) {
    if (recorded.has(name) && !names.has(name)) continue;
    assert.ok(names.has(name), `${name} is used but tokengate does not expose it`);
  }
});

test('recording rules give per-route TTFT and inter-token percentiles from live traffic', async () => {
  const ttft = await eventually('route:tokengate_time_to_first_token_seconds:p95_5m{route="demo"}');
  const value = Number(ttft[0].value[1]);
  // The demo engine waits 30 ms before the first token: TTFT is a little more.
  assert.ok(value > 0.025 && value < 0.5, `TTFT p95 ${value}`);
  for (const p of ['p50', 'p95', 'p99']) {
    const itl = await eventually(`route:tokengate_inter_token_latency_seconds:${p}_5m{route="fast"}`);
    const v = Number(itl[0].value[1]);
    assert.ok(v > 0.001 && v < 0.25, `inter-token ${p} ${v}`);
  }
  // Events wait in an idle proxy well under the 25 ms bucket.
  const delay = await eventually('route:tokengate_relay_delay_seconds:p99_5m{route="fast"}');
  const waited = Number(delay[0].value[1]);
  assert.ok(waited > 0 && waited < 0.025, `relay delay p99 ${waited}`);
  const tokens = await eventually('route:tokengate_output_tokens:rate5m{route="demo"}');
  assert.ok(Number(tokens[0].value[1]) > 0);
  // Alerts are loaded and evaluated; with healthy traffic, none fires.
  const alerts = await (await fetch(`${prometheus}/api/v1/rules?type=alert`)).json();
  const rules = alerts.data.groups.flatMap((g) => g.rules);
  assert.equal(rules.length, 8);
  for (const r of rules) assert.equal(r.health, 'ok', `${r.name}: ${r.lastError}`);
  assert.deepEqual(rules.filter((r) => r.state === 'firing').map((r) => r.name), []);
});

test('every dashboard query runs, and the traffic panels show data', async () => {
  // (The trace panel asks the trace data source, not Prometheus.)
  const targets = dashboard.panels.filter((p) => p.datasource.type === 'prometheus')
    .flatMap((p) => p.targets.map((t) => ({ panel: p.title, expr: t.expr })));
  assert.ok(targets.length >= 10);
  const mustHaveData = ['Time to first token (client side)', 'Inter-token latency', 'Output tokens per second',
                        'Requests by outcome', 'Responses by status class'];
  for (const { panel, expr } of targets) {
    const concrete = expr.replaceAll('$route', '.*').replaceAll('$__rate_interval', '30s');
    if (mustHaveData.includes(panel)) await eventually(concrete);
    else await query(concrete);
  }
  const titles = dashboard.panels.map((p) => p.title);
  for (const wanted of ['Active streams', 'Fallbacks and ejections', 'Output-limit actions'])
    assert.ok(titles.includes(wanted), `dashboard lacks ${wanted}`);
});
