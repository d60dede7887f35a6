// Starts the real tokengate binary (and its demo engine) on ephemeral ports
// for the SDK tests, and stops both afterwards.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const bin = process.env.TOKENGATE_BIN;
if (!bin) throw new Error("TOKENGATE_BIN must point at the tokengate binary");

// Resolves to the first match of `pattern` in what `child` prints.
export function printed(child, pattern, what) {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}:\n${seen}`)), 10000);
    const onData = (data) => {
      seen += data.toString();
      const match = seen.match(pattern);
      if (match) {
        clearTimeout(timer);
        // What the process prints from here on is read and dropped: kept and
        // searched again at every line, a soak's thousands of warnings cost
        // the driver more CPU with each one (and a pipe nobody reads would
        // block the process once full).
        for (const out of [child.stdout, child.stderr]) {
          out.off("data", onData);
          out.resume();
        }
        seen = "";
        resolve(match);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => reject(new Error(`${what}: process exited with ${code}:\n${seen}`)));
  });
}

// The first group of that match.
const waitForLine = async (child, pattern, what) => (await printed(child, pattern, what))[1];

// A self-signed P-256 certificate for localhost, made in `dir` by openssl:
// {cert, key}, the files' paths.
export function makeCertificate(dir) {
  const files = { cert: join(dir, "cert.pem"), key: join(dir, "key.pem") };
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
    "-keyout", files.key, "-out", files.cert], { stdio: "ignore" });
  return files;
}

// A tokengate started on the config `lines` (written to the file `config`)
// and added to `children`; resolves to the port its listener took.
async function startServe(config, lines, children) {
  writeFileSync(config, [...lines, ""].join("\n"));
  const proxy = spawn(bin, ["serve", "-c", config], { env: process.env });
  children.push(proxy);
  return waitForLine(proxy, /listening on https?:\/\/127\.0\.0\.1:(\d+)\/v1/, "proxy port");
}

const listenerLine = (tls) =>
  "  - {name: main, address: 127.0.0.1, port: 0, upstream: demo" +
  (tls ? `, tls: {cert_file: ${tls.cert}, key_file: ${tls.key}}}` : "}");

// topYaml: lines added at the top level of the proxy's config; tls:
// {cert, key} files for the listener (the clients then use https://localhost).
// upstreamTls: {cert, key} files for a TLS terminator (a second tokengate)
// put between the proxy and the demo engine, which the proxy then reaches
// over https://localhost as it would a hosted provider, trusting that
// certificate. kind: the demo upstream's `kind` (the API it is taken to
// speak; translated requests follow from it). The proxy is the last of
// the processes started.
// upstreamYaml: lines added under the demo upstream (4-space indent).
// engineArgs: more arguments for the demo engine (e.g. --apis chat_completions).
export async function startProxy({ upstreamKeyEnv, topYaml = [], tls, upstreamTls, kind, upstreamYaml = [],
  engineArgs = [] } = {}) {
  const engine = spawn(bin, ["demo-engine", "--port", "0", "--decode-tps", "200", ...engineArgs]);
  const children = [engine];
  const dir = mkdtempSync(join(tmpdir(), "tokengate-e2e-"));
  let port, enginePort;
  try {
    enginePort = await waitForLine(engine, /^PORT (\d+)$/m, "demo engine port");
    let upstreamLines = [`    base_url: http://127.0.0.1:${enginePort}/v1`];
    if (upstreamTls) {
      const terminatorPort = await startServe(join(dir, "terminator.yaml"), ["listeners:", listenerLine(upstreamTls),
        "upstreams:", "  demo:", ...upstreamLines], children);
      upstreamLines = [`    base_url: https://localhost:${terminatorPort}/v1`, `    ca_file: ${upstreamTls.cert}`];
    }
    port = await startServe(join(dir, "tokengate.yaml"), ["listeners:", listenerLine(tls), "upstreams:", "  demo:",
      ...upstreamLines, upstreamKeyEnv ? `    api_key: \${${upstreamKeyEnv}}` : "", kind ? `    kind: ${kind}` : "",
      ...upstreamYaml, ...topYaml], children);
  } catch (e) {
    // (A proxy that never started: the others must not outlive the test run.)
    for (const child of children) child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const proxy = children.at(-1);
  return {
    baseURL: tls ? `https://localhost:${port}/v1` : `http://127.0.0.1:${port}/v1`,
    port: Number(port),
    pid: proxy.pid,
    engineURL: `http://127.0.0.1:${enginePort}`,
    // Stops every process, the proxy first; resolves to how each ended,
    // [{process, code, signal}], code 0 after a clean stop.
    async stop() {
      const ends = [];
      for (const child of [...children].reverse()) {
        child.removeAllListeners("exit");
        const name = child.spawnargs[1];  // serve or demo-engine
        // (A child that already died, a crashed proxy, sends no exit event
        // again: waiting for one would hang the test run.)
        if (child.exitCode !== null || child.signalCode !== null) {
          ends.push({ process: name, code: child.exitCode, signal: child.signalCode });
          continue;
        }
        const done = new Promise((r) => child.on("exit", (code, signal) => r({ process: name, code, signal })));
        child.kill("SIGTERM");
        ends.push(await done);
      }
      rmSync(dir, { recursive: true, force: true });
      return ends;
    },
  };
}
