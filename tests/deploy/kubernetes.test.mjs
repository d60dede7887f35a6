// deploy/kubernetes: the manifests agree with each other, with the image and
// with the binary. No cluster runs in CI, so each promise the manifests make
// is checked here: the ConfigMap's policy passes `tokengate check`, probes
// hit the admin port the policy opens, the grace period outlasts preStop plus
// the drain, selectors match the pod labels, every Secret key the pods read
// exists, and `kubectl kustomize` renders the set where kubectl is installed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, parse } from 'yaml';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dir = path.join(root, 'deploy/kubernetes');
const bin = process.env.TOKENGATE_BIN ?? path.join(root, 'build/tokengate');

const docs = readdirSync(dir)
  .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
  .flatMap((f) => parseAllDocuments(readFileSync(path.join(dir, f), 'utf8')).map((d) => ({ file: f, ...d.toJS() })));
const find = (kind) => {
  const found = docs.filter((d) => d.kind === kind);
  assert.equal(found.length, 1, `exactly one ${kind}`);
  return found[0];
};
const deployment = find('Deployment');
const pod = deployment.spec.template;
const container = pod.spec.containers[0];
const configMap = find('ConfigMap');
const policy = parse(configMap.data['tokengate.yaml']);
const seconds = (d) => Number(/^(\d+)s$/.exec(d)?.[1] ?? NaN);

test('every manifest has apiVersion, kind and a name; kustomization lists files that exist', () => {
  for (const d of docs) assert.ok(d.apiVersion && d.kind && d.metadata?.name, `${d.file} is incomplete`);
  const kustomization = parse(readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8'));
  const files = new Set(readdirSync(dir));
  for (const r of kustomization.resources) assert.ok(files.has(r), `kustomization lists missing ${r}`);
});

test("the ConfigMap's policy passes tokengate check, with every ${VAR} supplied by the pod", () => {
  const vars = [...configMap.data['tokengate.yaml'].matchAll(/\$\{(\w+)\}/g)].map((m) => m[1]);
  const env = Object.fromEntries(container.env.map((e) => [e.name, 'placeholder']));
  for (const v of vars) assert.ok(v in env, `policy uses \${${v}} but the container does not set it`);
  const work = mkdtempSync(path.join(tmpdir(), 'tg-k8s-'));
  try {
    const file = path.join(work, 'tokengate.yaml');
    writeFileSync(file, configMap.data['tokengate.yaml']);
    const out = execFileSync(bin, ['check', '-c', file], { env: { ...process.env, ...env }, encoding: 'utf8' });
    assert.match(out, /: ok/);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

test('the container serves the mounted policy as the non-root user the image has', () => {
  const mount = container.volumeMounts.find((m) => m.name === 'policy');
  assert.equal(container.args.join(' '), `serve -c ${mount.mountPath}/tokengate.yaml`);
  assert.ok(!('subPath' in mount), 'a subPath mount never sees ConfigMap updates, so reload would not happen');
  assert.equal(pod.spec.volumes.find((v) => v.name === 'policy').configMap.name, configMap.metadata.name);
  const dockerfile = readFileSync(path.join(root, 'deploy/docker/Dockerfile'), 'utf8');
  const user = /^USER (\d+):(\d+)$/m.exec(dockerfile);
  assert.equal(pod.spec.securityContext.runAsUser, Number(user[1]));
  assert.equal(pod.spec.securityContext.runAsNonRoot, true);
  assert.equal(container.securityContext.readOnlyRootFilesystem, true);
  assert.equal(container.securityContext.allowPrivilegeEscalation, false);
});

test('ports and probes: readiness on /readyz and liveness on /healthz at the policy admin port', () => {
  const port = (name) => container.ports.find((p) => p.name === name).containerPort;
  assert.equal(port('admin'), policy.admin.port);
  assert.equal(port('http'), policy.listeners[0].port);
  assert.equal(policy.admin.address, '0.0.0.0', 'probes come from the pod network');
  assert.deepEqual(container.readinessProbe.httpGet, { path: '/readyz', port: 'admin' });
  assert.deepEqual(container.livenessProbe.httpGet, { path: '/healthz', port: 'admin' });
  assert.equal(pod.metadata.annotations['prometheus.io/port'], String(policy.admin.port));
});

test('rollouts do not cut streams: grace period > preStop pause + drain_timeout', () => {
  const preStop = container.lifecycle.preStop.exec.command;
  assert.equal(preStop[0], 'sleep');
  const drain = seconds(policy.drain_timeout);
  assert.ok(pod.spec.terminationGracePeriodSeconds > Number(preStop[1]) + drain,
    `grace ${pod.spec.terminationGracePeriodSeconds}s vs preStop ${preStop[1]}s + drain ${drain}s`);
  assert.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0);
});

test('Service, PDB and HPA select the Deployment and its pods', () => {
  const labels = pod.metadata.labels;
  const matches = (selector) => Object.entries(selector).every(([k, v]) => labels[k] === v);
  assert.ok(matches(deployment.spec.selector.matchLabels));
  assert.ok(matches(find('Service').spec.selector));
  assert.ok(matches(find('PodDisruptionBudget').spec.selector.matchLabels));
  const servicePorts = find('Service').spec.ports.map((p) => p.targetPort);
  assert.deepEqual(servicePorts.sort(), ['admin', 'http']);
  const hpa = find('HorizontalPodAutoscaler');
  assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name });
  assert.ok(hpa.spec.minReplicas >= 2, 'one replica cannot roll without a gap');
  const monitor = find('ServiceMonitor');
  assert.ok(Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => find('Service').metadata.labels[k] === v));
  assert.equal(monitor.spec.endpoints[0].port, 'admin');
});

test('every Secret key the pod reads is in the example Secret', () => {
  const secret = find('Secret');
  for (const e of container.env.filter((e) => e.valueFrom?.secretKeyRef)) {
    assert.equal(e.valueFrom.secretKeyRef.name, secret.metadata.name);
    assert.ok(e.valueFrom.secretKeyRef.key in secret.stringData, `missing key ${e.valueFrom.secretKeyRef.key}`);
  }
});

test('kubectl kustomize renders the set', (t) => {
  if (spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status !== 0) {
    t.skip('kubectl not installed');
    return;
  }
  const rendered = parseAllDocuments(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' })).map((d) => d.toJS());
  const kinds = rendered.map((d) => d.kind).sort();
  assert.deepEqual(kinds, ['ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'Namespace', 'PodDisruptionBudget', 'Service']);
  for (const d of rendered.filter((d) => d.kind !== 'Namespace')) assert.equal(d.metadata.namespace, 'tokengate');
});
