// Starts the real tokengate binary (and its demo engine) on ephemeral ports
// for the SDK tests, and stops both afterwards.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const bin = process.env.TOKENGATE_BIN;
if (!bin) throw new Error("TOKENGATE_BIN must point at the tokengate binary");

function waitForLine(child, pattern, what) {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}:\n${seen}`)), 10000);
    const onData = (data) => {
      seen += data.toString();
      const match = seen.match(pattern);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => reject(new Error(`${what}: process exited with ${code}:\n${seen}`)));
  });
}

// topYaml: lines added at the top level of the proxy's config; tls:
// {cert, key} files for the listener (the clients then use https://localhost).
export async function startProxy({ upstreamKeyEnv, topYaml = [], tls } = {}) {
  const engine = spawn(bin, ["demo-engine", "--port", "0", "--decode-tps", "200"]);
  const enginePort = await waitForLine(engine, /^PORT (\d+)$/m, "demo engine port");
  const dir = mkdtempSync(join(tmpdir(), "tokengate-e2e-"));
  const config = join(dir, "tokengate.yaml");
  writeFileSync(
    config,
    [
      "listeners:",
      "  - {name: main, address: 127.0.0.1, port: 0, upstream: demo" +
        (tls ? `, tls: {cert_file: ${tls.cert}, key_file: ${tls.key}}}` : "}"),
      "upstreams:",
      "  demo:",
      `    base_url: http://127.0.0.1:${enginePort}/v1`,
      upstreamKeyEnv ? `    api_key: \${${upstreamKeyEnv}}` : "",
      ...topYaml,
      "",
    ].join("\n"),
  );
  const proxy = spawn(bin, ["serve", "-c", config], { env: process.env });
  let port;
  try {
    port = await waitForLine(proxy, /listening on https?:\/\/127\.0\.0\.1:(\d+)\/v1/, "proxy port");
  } catch (e) {
    // (A proxy that never started: the engine must not outlive the test run.)
    for (const child of [proxy, engine]) child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    baseURL: tls ? `https://localhost:${port}/v1` : `http://127.0.0.1:${port}/v1`,
    port: Number(port),
    pid: proxy.pid,
    engineURL: `http://127.0.0.1:${enginePort}`,
    async stop() {
      for (const child of [proxy, engine]) {
        child.removeAllListeners("exit");
        // (A child that already died, a crashed proxy, sends no exit event
        // again: waiting for one would hang the test run.)
        if (child.exitCode !== null || child.signalCode !== null) continue;
        const done = new Promise((r) => child.on("exit", r));
        child.kill("SIGTERM");
        await done;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
